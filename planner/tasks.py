"""Celery tasks of the planner app. Tasks take ids, call a service and handle retries only."""

from __future__ import annotations

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from planner.services.runs import run_execute, run_fail_timeout


@shared_task(name="planner.ping")
def ping() -> str:
    """Round trip for health checks and the real-worker test."""
    return "pong"


@shared_task(name="planner.estimation_run", acks_late=True, reject_on_worker_lost=True)
def estimation_run_task(run_id: int) -> str:
    """Execute estimation run ``run_id``; returns its final status.

    Acknowledged only when done: if the worker dies mid-run, the broker hands the task to
    another worker and :func:`run_execute` starts the run again.
    """
    try:
        run = run_execute(run_id=run_id)
    except SoftTimeLimitExceeded:
        run_fail_timeout(run_id=run_id, seconds=settings.CELERY_TASK_SOFT_TIME_LIMIT)
        return "failed"
    return run.status if run is not None else "already finished"
