"""Celery tasks of the planner app. Tasks take ids, call a service and handle retries only.

The services send them by name (the constants they define, used here), so no service imports
this module."""

from __future__ import annotations

from celery import Task, shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from planner.accounts.services import api_tokens_expired_delete
from planner.budgets.notifications import (
    SEND_NOTIFICATION_TASK,
    RetryLater,
    notification_send,
    notifications_dispatch,
)
from planner.budgets.packs import (
    SIGNOFF_PACK_TASK,
    signoff_pack_render,
    signoff_packs_dispatch_pending,
    signoff_packs_recover_lost,
    signoff_packs_recover_unclaimed,
)
from planner.capacity.services import (
    CAPACITY_CHUNK_TASK,
    CAPACITY_DISPATCH_TASK,
    CAPACITY_MERGE_TASK,
    capacity_chunk_execute,
    capacity_plan_merge,
    capacity_plans_dispatch_pending,
    plan_dispatch,
)
from planner.scenarios.services.runs import (
    ESTIMATION_RUN_TASK,
    run_execute,
    run_fail_timeout,
    runs_dispatch_pending,
    runs_recover_lost,
    runs_recover_unclaimed,
)


@shared_task(name="planner.ping", ignore_result=False)
def ping() -> str:
    """Round trip for health checks and the real-worker test."""
    return "pong"


@shared_task(name=ESTIMATION_RUN_TASK, bind=True, acks_late=True, reject_on_worker_lost=True)
def estimation_run_task(self: Task, run_id: int) -> str:
    """Execute estimation run ``run_id``; returns its final status.

    Acknowledged only when done: if the worker dies mid-run, the broker hands the task to
    another worker and :func:`run_execute` starts the run again.
    """
    try:
        run = run_execute(
            run_id=run_id,
            task_id=self.request.id,
            # In eager mode the web process runs it to the end; nobody watches a heartbeat.
            heartbeat_s=None if self.request.is_eager else settings.RUN_HEARTBEAT_S,
        )
    except SoftTimeLimitExceeded:
        run_fail_timeout(run_id=run_id, seconds=settings.CELERY_TASK_SOFT_TIME_LIMIT)
        return "failed"
    return run.status if run is not None else "skipped (finished or superseded)"


@shared_task(name=CAPACITY_CHUNK_TASK, bind=True, acks_late=True, reject_on_worker_lost=True)
def capacity_chunk_task(self: Task, chunk_id: int) -> str:
    """Search one chunk of a capacity plan (a few cluster sizes of one accelerator).

    Acknowledged only when done: a chunk whose worker died is handed to another worker (or
    queued again by the dispatcher when its heartbeat goes stale); a done chunk is never
    searched twice. The worker finishing a plan's last chunk sends its merge task.
    """
    return capacity_chunk_execute(
        chunk_id=chunk_id,
        task_id=self.request.id,
        worker=self.request.hostname or "",
        heartbeat_s=None if self.request.is_eager else settings.RUN_HEARTBEAT_S,
    )


@shared_task(name=CAPACITY_DISPATCH_TASK, acks_late=True, reject_on_worker_lost=True)
def capacity_dispatch_task(plan_id: int) -> int:
    """Send the tasks of a new plan's chunks (from a worker, so the request sends one task
    whatever the plan's size); returns how many were sent."""
    return plan_dispatch(plan_id=plan_id)


@shared_task(name=CAPACITY_MERGE_TASK, acks_late=True, reject_on_worker_lost=True)
def capacity_merge_task(plan_id: int) -> str:
    """Price every point of a plan whose chunks are all done and store its result."""
    return capacity_plan_merge(plan_id=plan_id)


@shared_task(name=SEND_NOTIFICATION_TASK, bind=True, acks_late=True)
def send_notification_task(self: Task, notification_id: int) -> str:
    """Send notification ``notification_id``; a refusing or unreachable mail server is tried
    again after the row's backoff (5 s, 10 s, ... up to 10 min, for 24 h), then given up on
    (:func:`~planner.budgets.notifications.notification_send`). In eager mode the retry is
    left to the dispatcher: retrying inside the request would hold it."""
    try:
        return notification_send(notification_id=notification_id)
    except RetryLater as later:
        if self.request.is_eager:
            return f"retry in {later.delay_s:g} s (dispatcher)"
        raise self.retry(countdown=later.delay_s, max_retries=None, exc=later.error) from None


@shared_task(name=SIGNOFF_PACK_TASK, bind=True, acks_late=True, reject_on_worker_lost=True)
def signoff_pack_task(self: Task, pack_id: int) -> str:
    """Render a frozen budget request's sign-off pack (PDF and XLSX) and store it, so that
    downloads serve the stored files."""
    return signoff_pack_render(
        pack_id=pack_id,
        task_id=self.request.id,
        heartbeat_s=None if self.request.is_eager else settings.RUN_HEARTBEAT_S,
    )


@shared_task(name="planner.dispatch_pending")
def dispatch_pending() -> dict[str, list[int]]:
    """The outbox's dispatcher, run by ``celery beat`` every ``DISPATCH_INTERVAL_S``: send
    what the broker missed, queue again (or fail) runs and plan chunks whose worker was
    lost, send again jobs whose message the broker lost, send plan merges that never ran,
    and the same for sign-off pack renders."""
    requeued, failed = runs_recover_lost()
    packs_requeued, packs_failed = signoff_packs_recover_lost()
    return {
        "runs_sent": runs_dispatch_pending(),
        "runs_requeued": requeued,
        "runs_failed": failed,
        "runs_resent": runs_recover_unclaimed(),
        "signoff_packs_resent": signoff_packs_recover_unclaimed(),
        "notifications_sent": notifications_dispatch(),
        "signoff_packs_sent": signoff_packs_dispatch_pending(),
        "signoff_packs_requeued": packs_requeued,
        "signoff_packs_failed": packs_failed,
        **capacity_plans_dispatch_pending(),
    }


@shared_task(name="planner.tokens_expired_delete")
def tokens_expired_delete() -> int:
    """Delete expired API tokens, daily from ``celery beat``; returns how many went."""
    return api_tokens_expired_delete()
