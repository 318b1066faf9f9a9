"""Sending tasks to the broker once, quickly, or not at all: the outbox retries.

Uses Celery's current app (``trainplan.celery.app`` in the web process and the workers), so
plumbing needs no import of the project package.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from celery import current_app as app
from kombu.exceptions import ChannelError

# How long sending one task may take before the broker counts as down [s]: connecting and
# writing each. The web process sends on commit, so this bounds what a request waits.
PUBLISH_TIMEOUT_S = 1.0
_PUBLISH_TRANSPORT_OPTIONS = {
    "max_retries": 0,  # one try: the outbox row is the retry
    "socket_connect_timeout": PUBLISH_TIMEOUT_S,
    "socket_timeout": PUBLISH_TIMEOUT_S,
}


def runs_in_process() -> bool:
    """Tasks run here, in the web process, as they are sent (the embedded default's eager
    Celery): no worker exists or is needed, so nothing waits for one."""
    return bool(app.conf.task_always_eager)


#: What a job saved but not yet started says, by where its tasks run.
WAITING_IN_PROCESS = "Saved: it runs in this process (no worker needed) as the request finishes."
WAITING_FOR_WORKER = "Waiting for a worker…"


def waiting_message() -> str:
    """What a saved job that no worker has taken yet says (runs, capacity plans)."""
    return WAITING_IN_PROCESS if runs_in_process() else WAITING_FOR_WORKER


def publish(task: str, *args: object, task_id: str | None = None) -> None:
    """Send the task registered as ``task`` with ``args`` to the broker once, or raise
    within about ``PUBLISH_TIMEOUT_S``.

    Tasks are sent by name: the sender need not import the module that defines them. Celery's
    defaults would retry the connection and the publish for several seconds (and longer still
    through the result store); callers keep an outbox row instead, which the dispatcher sends
    later. In eager mode the task runs here and then, and its own error is raised.
    """
    _sent, error = publish_many(task, [(args, task_id)])
    if error is not None:
        raise error


def publish_many(
    task: str, calls: Sequence[tuple[tuple[object, ...], str | None]]
) -> tuple[int, Exception | None]:
    """Send the task registered as ``task`` with each ``(args, task_id)`` over one
    connection, each once.

    Returns how many reached the broker and, when it failed part way, the error (the rest
    are left to the caller's outbox, as with :func:`publish`).
    """
    sent = 0
    try:
        if runs_in_process():
            registered = _registered(task)
            for args, task_id in calls:
                registered.apply_async(args, task_id=task_id)
                sent += 1
            return sent, None
        with app.connection_for_write(
            connect_timeout=PUBLISH_TIMEOUT_S, transport_options=_PUBLISH_TRANSPORT_OPTIONS
        ) as connection:
            for args, task_id in calls:
                app.send_task(
                    task,
                    args,
                    task_id=task_id,
                    connection=connection,
                    retry=False,
                    # What the task's own apply_async sends (no task overrides the setting);
                    # left out, the sender would subscribe to a result nobody reads.
                    ignore_result=app.conf.task_ignore_result,
                )
                sent += 1
    except Exception as error:  # the broker's errors vary by transport; any means "not sent"
        if app.conf.task_always_eager:
            raise  # in eager mode it is the task's own error, not the broker's
        return sent, error
    return sent, None


def _registered(name: str) -> Any:
    """The task registered as ``name``, to run in eager mode; the apps' task modules are
    imported first where this process has not (a worker imports them when it starts)."""
    if name not in app.tasks:
        app.autodiscover_tasks(force=True)
    return app.tasks[name]


def queue_length() -> int | None:
    """Messages waiting in the default queue, taken by no worker yet: 0 in eager mode, None
    when the broker cannot be asked. A queue the broker lost (a flushed Redis) is empty."""
    if runs_in_process():
        return 0
    try:
        with app.connection_for_write(
            connect_timeout=PUBLISH_TIMEOUT_S, transport_options=_PUBLISH_TRANSPORT_OPTIONS
        ) as connection:
            channel: Any = connection.default_channel
            declared = channel.queue_declare(queue=app.conf.task_default_queue, passive=True)
            return int(declared.message_count)
    except ChannelError:  # the queue itself is gone: nothing waits in it
        return 0
    except Exception:  # the broker's errors vary by transport; any means "cannot tell"
        return None
