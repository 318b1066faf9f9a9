"""Celery tasks of the planner app. Tasks take ids, call a service and handle retries only."""

from celery import shared_task


@shared_task(name="planner.ping")
def ping() -> str:
    """Round trip for health checks and the real-worker test."""
    return "pong"
