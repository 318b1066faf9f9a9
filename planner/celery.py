"""The Celery application. Workers start with ``celery -A planner worker``, the dispatcher's
schedule with ``celery -A planner beat``."""

from __future__ import annotations

import os
from typing import Any

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "planner.settings")

app = Celery("trainplan")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

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
