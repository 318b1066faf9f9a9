"""A worker's sign of life on a row while a long step runs (a run, a plan's chunk)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime

from django.db import connection
from django.db.models import Model, Q, QuerySet
from django.db.models.functions import Coalesce


@contextmanager
def heartbeat(beat: Callable[[], object], every_s: float | None, *, name: str) -> Iterator[None]:
    """Call ``beat`` every ``every_s`` seconds from a thread while the block runs, so the row
    does not look lost during a step that reports no progress; nothing when ``every_s`` is
    None (eager mode: nobody watches)."""
    if not every_s:
        yield
        return
    stop = threading.Event()

    def loop() -> None:
        try:
            while not stop.wait(every_s):
                beat()
        finally:
            connection.close()  # this thread's own connection

    thread = threading.Thread(target=loop, name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=every_s)


def gone_quiet[M: Model](running: QuerySet[M], *, stale_before: datetime) -> QuerySet[M]:
    """The rows of ``running`` whose worker stopped beating: last heartbeat (or start, or
    neither) before ``stale_before``. Locked for update; rows another dispatcher holds are
    skipped. Call it inside a transaction."""
    annotated = running.select_for_update(skip_locked=True).annotate(
        last_sign=Coalesce("heartbeat_at", "started_at")
    )
    lost: QuerySet[M] = annotated.filter(Q(last_sign__lt=stale_before) | Q(last_sign=None))  # type: ignore[assignment]
    return lost
