"""Liveness of the services TrainPlan depends on: database, broker and Celery workers."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from django.db import connection

from planner.celery import app as celery_app

BROKER_TIMEOUT_S = 2
WORKER_PING_TIMEOUT_S = 1.5


@dataclass(frozen=True)
class ServiceStatus:
    up: bool
    detail: str

    def as_dict(self) -> dict[str, object]:
        return {"status": "up" if self.up else "down", **asdict(self)}


def database_status() -> ServiceStatus:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as error:  # any driver error means "down"; the detail says which
        return ServiceStatus(False, f"{connection.vendor}: {error}")
    return ServiceStatus(True, connection.vendor)


def broker_status() -> ServiceStatus:
    if celery_app.conf.task_always_eager:
        return ServiceStatus(True, "in-process (eager): no broker configured")
    try:
        with celery_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=BROKER_TIMEOUT_S)
    except Exception as error:
        return ServiceStatus(False, f"broker unreachable: {error}")
    return ServiceStatus(True, "redis")


def worker_status() -> ServiceStatus:
    if celery_app.conf.task_always_eager:
        return ServiceStatus(True, "in-process (eager): tasks run in the web process")
    try:
        replies = celery_app.control.ping(timeout=WORKER_PING_TIMEOUT_S)
    except Exception as error:
        return ServiceStatus(False, f"cannot ping workers: {error}")
    if not replies:
        return ServiceStatus(False, "no Celery worker answered a ping")
    names = sorted(name for reply in replies for name in reply)
    return ServiceStatus(True, f"{len(names)} worker(s): {', '.join(names)}")


def system_health() -> dict[str, ServiceStatus]:
    database = database_status()
    broker = broker_status()
    # Without a broker the worker ping can only time out: say so instead of waiting.
    worker = worker_status() if broker.up else ServiceStatus(False, "broker is down")
    return {"database": database, "broker": broker, "worker": worker}
