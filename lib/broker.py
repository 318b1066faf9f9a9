"""Sending tasks to the broker once, quickly, or not at all: the outbox retries.

Uses Celery's current app (``trainplan.celery.app`` in the web process and the workers), so
plumbing needs no import of the project package.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from celery import current_app as app

# How long sending one task may take before the broker counts as down [s]: connecting and
# writing each. The web process sends on commit, so this bounds what a request waits.
PUBLISH_TIMEOUT_S = 1.0
_PUBLISH_TRANSPORT_OPTIONS = {
    "max_retries": 0,  # one try: the outbox row is the retry
    "socket_connect_timeout": PUBLISH_TIMEOUT_S,
    "socket_timeout": PUBLISH_TIMEOUT_S,
}


def publish(task: Any, *args: object, task_id: str | None = None) -> None:
    """Send ``task(*args)`` to the broker once, or raise within about ``PUBLISH_TIMEOUT_S``.

    Celery's defaults would retry the connection and the publish for several seconds (and
    longer still through the result store); callers keep an outbox row instead, which the
    dispatcher sends later. In eager mode the task runs here and then.
    """
    if app.conf.task_always_eager:
        task.apply_async(args, task_id=task_id)
        return
    with app.connection_for_write(
        connect_timeout=PUBLISH_TIMEOUT_S, transport_options=_PUBLISH_TRANSPORT_OPTIONS
    ) as connection:
        task.apply_async(args, task_id=task_id, connection=connection, retry=False)


def publish_many(
    task: Any, calls: Sequence[tuple[tuple[object, ...], str]]
) -> tuple[int, Exception | None]:
    """Send ``task(*args)`` under each ``(args, task_id)`` over one connection, each once.

    Returns how many reached the broker and, when it failed part way, the error (the rest
    are left to the caller's outbox, as with :func:`publish`).
    """
    sent = 0
    try:
        if app.conf.task_always_eager:
            for args, task_id in calls:
                task.apply_async(args, task_id=task_id)
                sent += 1
            return sent, None
        with app.connection_for_write(
            connect_timeout=PUBLISH_TIMEOUT_S, transport_options=_PUBLISH_TRANSPORT_OPTIONS
        ) as connection:
            for args, task_id in calls:
                task.apply_async(args, task_id=task_id, connection=connection, retry=False)
                sent += 1
    except Exception as error:  # the broker's errors vary by transport; any means "not sent"
        if app.conf.task_always_eager:
            raise  # in eager mode it is the task's own error, not the broker's
        return sent, error
    return sent, None
