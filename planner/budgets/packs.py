"""The sign-off pack rendered once: a frozen request's PDF and XLSX, stored, served as stored.

A submitted request cannot change, so its pack is rendered by a worker when it is frozen and
kept in a :class:`~planner.budgets.models.SignoffPack` row; a download reads the row. The pack
also shows what happens after the snapshot (the decisions and the trail, warnings arisen
since submission), so each stored pack is labelled with its *edition* (:func:`pack_edition`):
a decision queues the next edition, and a download whose edition is not stored (its worker
has not got to it yet) renders it once and stores it, so no click renders twice.

A draft (or a request sent back for changes) has no snapshot: its pack is a live preview,
cached until the draft changes (the edition of a draft hashes its preview document).

The render is a job of :mod:`lib.jobs` (``PACK_JOBS``): the row is its outbox, the task claims
it, beats on it while rendering, and the dispatcher sends what the broker missed and queues
again a render whose worker was lost.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from functools import partial
from typing import Literal

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Max
from django.utils import timezone

from lib import broker, jobs
from lib.cacheguard import cache_call
from planner.budgets.models import AuditEvent, BudgetRequest, PackStatus, SignoffPack
from planner.budgets.signoff import (
    SignoffUnavailable,
    signoff_document,
    signoff_pdf,
    signoff_xlsx,
)
from planner.budgets.snapshot import snapshot_hash
from planner.budgets.warnings import request_warnings
from planner.scenarios.models import heartbeat_stale_before, unclaimed_before

logger = logging.getLogger(__name__)

#: The task that renders a stored pack (``planner.tasks``), sent by this name.
SIGNOFF_PACK_TASK = "planner.signoff_pack_render"
#: Raise when the templates or renderers change what a pack shows: stored packs of an older
#: version are then rendered again on their next download.
RENDERER_VERSION = 1
#: How long a draft's preview stays cached [s] (its key changes with the draft anyway).
PREVIEW_CACHE_S = 3600

PACK_JOBS = jobs.JobKind(
    model=SignoffPack,
    task=SIGNOFF_PACK_TASK,
    label="sign-off pack",
    broker=broker,
    queued=PackStatus.QUEUED,
    running=PackStatus.RUNNING,
)

Kind = Literal["pdf", "xlsx"]


@dataclass(frozen=True)
class Rendered:
    """Both files of one edition; ``pdf`` None (and ``error`` why) where WeasyPrint cannot run."""

    pdf: bytes | None
    xlsx: bytes
    error: str
    seconds: float


# --- What a pack shows -------------------------------------------------------------------------


def pack_edition(request: BudgetRequest) -> str:
    """A hash of everything the pack of ``request`` shows: the snapshot (a draft's preview
    document, its freezing time aside), the state and the last event of the trail (every
    decision adds one), the warnings arisen since submission and the renderer's version."""
    document = signoff_document(request)
    arisen = request_warnings(request, document).since_submission
    last_event = AuditEvent.objects.filter(request=request).aggregate(last=Max("pk"))["last"]
    return snapshot_hash(
        {
            "renderer": RENDERER_VERSION,
            "document": snapshot_hash({k: v for k, v in document.items() if k != "frozen_at"}),
            "snapshot_sha256": request.snapshot_sha256,
            "state": request.state,
            "approvals_required": request.approvals_required,
            "trail": last_event,
            "arisen": [[w.code, w.severity, w.message] for w in arisen],
        }
    )


def _render(request: BudgetRequest) -> Rendered:
    started = time.perf_counter()
    try:
        pdf, error = signoff_pdf(request), ""
    except SignoffUnavailable as unavailable:
        pdf, error = None, str(unavailable)
    xlsx = signoff_xlsx(request)
    return Rendered(pdf, xlsx, error, time.perf_counter() - started)


def _stored_fields(request: BudgetRequest, edition: str, rendered: Rendered) -> dict[str, object]:
    return {
        "edition": edition,
        "snapshot_sha256": request.snapshot_sha256,
        "renderer_version": RENDERER_VERSION,
        "pdf": rendered.pdf,
        "xlsx": rendered.xlsx,
        "error": rendered.error,
        "rendered_at": timezone.now(),
        "render_seconds": rendered.seconds,
        "renders": F("renders") + 1,
    }


# --- Queue and render on the worker ------------------------------------------------------------


def signoff_pack_queue(request: BudgetRequest) -> None:
    """Queue the render of a frozen request's pack, in the transaction that froze it or
    recorded a decision; its task is sent once that commits. A render already under way
    is superseded (its files would show the request as it was)."""
    pack, _created = SignoffPack.objects.get_or_create(request=request)
    pack.status, pack.task_id, pack.dispatched_at = PackStatus.QUEUED, jobs.new_task_id(), None
    pack.attempts = 0
    pack.save(update_fields=["status", "task_id", "dispatched_at", "attempts"])
    transaction.on_commit(partial(signoff_pack_dispatch, pack_id=pack.pk))


def signoff_pack_dispatch(*, pack_id: int) -> bool:
    """Hand the render to a worker; False (the dispatcher sends it later) when the broker
    cannot be reached. Never raises: it runs after a commit."""
    return jobs.dispatch(PACK_JOBS, pack_id)


def signoff_packs_dispatch_pending() -> list[int]:
    """Send every queued render that never reached the broker."""
    return jobs.dispatch_pending(PACK_JOBS)


def signoff_packs_recover_lost() -> tuple[list[int], list[int]]:
    """Queue again the renders whose worker stopped beating; give up after
    ``RUN_MAX_ATTEMPTS`` tries (a download then renders the pack itself)."""
    return jobs.recover_lost(
        PACK_JOBS,
        stale_before=heartbeat_stale_before(timezone.now()),
        max_attempts=settings.RUN_MAX_ATTEMPTS,
        give_up=_give_up,
        send=lambda pack: signoff_pack_dispatch(pack_id=pack.pk),
    )


def signoff_packs_recover_unclaimed() -> list[int]:
    """Send again, under a new task id, the queued renders whose message the broker lost."""
    return jobs.recover_unclaimed(
        PACK_JOBS,
        sent_before=unclaimed_before(timezone.now()),
        send=lambda pack: signoff_pack_dispatch(pack_id=pack.pk),
    )


def _give_up(pack: SignoffPack) -> None:
    pack.status, pack.error = PackStatus.FAILED, f"the worker was lost {pack.attempts} times"
    pack.save(update_fields=["status", "error"])


def signoff_pack_render(*, pack_id: int, task_id: str | None, heartbeat_s: float | None) -> str:
    """Render and store the pack of ``pack_id`` (the task's body); what became of it."""
    pack = jobs.claim(PACK_JOBS, pack_id, task_id)
    if pack is None:
        return "skipped (done or superseded)"
    request = BudgetRequest.objects.select_related("project__organisation").get(pk=pack.request_id)
    mine = SignoffPack.objects.filter(pk=pack_id, task_id=pack.task_id)
    if not request.is_frozen:  # sent back for changes since: its pack is a live preview
        mine.update(status=PackStatus.DONE)
        return "not frozen"
    edition = pack_edition(request)
    if pack.edition == edition and pack.xlsx is not None:  # a download stored it already
        mine.update(status=PackStatus.DONE)
        return "current"
    with jobs.beating(PACK_JOBS, pack_id, heartbeat_s):
        rendered = _render(request)
    stored = mine.update(status=PackStatus.DONE, **_stored_fields(request, edition, rendered))
    logger.info("sign-off pack of request %s rendered in %.2f s", request.pk, rendered.seconds)
    return "rendered" if stored else "superseded"


# --- Downloads ---------------------------------------------------------------------------------


def signoff_pack_file(request: BudgetRequest, kind: Kind) -> bytes:
    """The pack of ``request`` as ``kind``: stored once frozen, a cached preview before.

    A frozen request's current edition is read from its row; where the worker has not
    stored it yet it is rendered here once and stored. Raises
    :class:`~planner.budgets.signoff.SignoffUnavailable` where the PDF cannot be made.
    """
    edition = pack_edition(request)
    if not request.is_frozen:
        return _preview(request, kind, edition)
    stored = (
        SignoffPack.objects.filter(request=request, edition=edition)
        .values_list(kind, "error")
        .first()
    )
    if stored is not None and stored[0] is not None:
        return bytes(stored[0])
    if stored is not None and kind == "pdf" and stored[1]:
        raise SignoffUnavailable(stored[1])
    rendered = _render(request)
    _store_here(request, edition, rendered)
    return _chosen(rendered, kind)


def _chosen(rendered: Rendered, kind: Kind) -> bytes:
    if kind == "xlsx":
        return rendered.xlsx
    if rendered.pdf is None:
        raise SignoffUnavailable(rendered.error)
    return rendered.pdf


def _store_here(request: BudgetRequest, edition: str, rendered: Rendered) -> None:
    """Store an edition a download rendered, leaving the row's job as it is (a queued render
    of this edition then finds it stored)."""
    fields = _stored_fields(request, edition, rendered)
    if SignoffPack.objects.filter(request=request).update(**fields):
        return
    try:
        with transaction.atomic():
            SignoffPack.objects.create(
                request=request, status=PackStatus.DONE, **(fields | {"renders": 1})
            )
    except IntegrityError:  # a worker created the row meanwhile
        SignoffPack.objects.filter(request=request).update(**fields)


def _preview(request: BudgetRequest, kind: Kind, edition: str) -> bytes:
    """A draft's pack, rendered live and cached under its edition until the draft changes;
    rendered uncached while the cache (Redis) cannot be reached."""
    key = f"signoff-preview:{request.pk}:{kind}:{edition}"
    body = cache_call(lambda store: store.get(key), None, what="sign-off preview")
    if body is None:
        body = _preview_render(request, kind)
        cache_call(
            lambda store: store.set(key, body, PREVIEW_CACHE_S), None, what="sign-off preview"
        )
    return bytes(body)


def _preview_render(request: BudgetRequest, kind: Kind) -> bytes:
    return signoff_pdf(request) if kind == "pdf" else signoff_xlsx(request)
