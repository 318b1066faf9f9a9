"""Health of TrainPlan for machines: liveness (the process answers) and readiness (the
database, the broker and at least one Celery worker answer).

``/livez`` touches no service and answers before any other middleware (no host check, no
https redirect, no session). ``/readyz`` (alias ``/healthz``) checks the database and the
broker side by side with short timeouts and reuses a recent worker ping, so it answers well
under a second even when a service hangs. Which service is down, and the worker names, are
shown only to staff and to callers from ``HEALTH_NETWORKS``; others get the status alone.
"""

from __future__ import annotations

import ipaddress
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import asdict, dataclass

from django.conf import settings
from django.db import DatabaseError, InterfaceError, connection, connections
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from trainplan.celery import app as celery_app

LIVENESS_PATH = "/livez"
# The database and broker checks run side by side, each given this long.
CHECK_TIMEOUT_S = 0.3
BROKER_CONNECT_TIMEOUT_S = 1  # kombu takes whole seconds; the check's deadline is shorter
# A broadcast ping waits its whole timeout for replies, so it is kept short and reused.
WORKER_PING_TIMEOUT_S = 0.5
WORKER_PING_MAX_AGE_S = 12.0

# Bounded, so checks stuck on a hanging service cannot pile up threads; once they fill it,
# later checks time out in the queue and report the service down.
_checks = ThreadPoolExecutor(max_workers=4, thread_name_prefix="health-check")


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
        with celery_app.connection_for_write(connect_timeout=CHECK_TIMEOUT_S) as conn:
            conn.ensure_connection(
                max_retries=1, interval_start=0, timeout=BROKER_CONNECT_TIMEOUT_S
            )
            transport = conn.transport.driver_type
    except Exception as error:
        return ServiceStatus(False, f"broker unreachable: {error}")
    return ServiceStatus(True, str(transport))


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


class WorkerPingCache:
    """The last :func:`worker_status`, reused for ``max_age_s`` seconds.

    Probes from several load balancers then cost one ping per period, not one each. The
    lock makes concurrent probes share one ping instead of sending one each.
    """

    def __init__(self, max_age_s: float = WORKER_PING_MAX_AGE_S) -> None:
        self.max_age_s = max_age_s
        self._lock = threading.Lock()
        self._status: ServiceStatus | None = None
        self._taken_at = 0.0

    def status(self) -> ServiceStatus:
        with self._lock:
            if self._status is None or time.monotonic() - self._taken_at > self.max_age_s:
                self._status = worker_status()
                self._taken_at = time.monotonic()
            return self._status

    def clear(self) -> None:
        with self._lock:
            self._status = None


worker_ping_cache = WorkerPingCache()


def _on_own_connection(check: Callable[[], ServiceStatus]) -> Callable[[], ServiceStatus]:
    """Run a database check in a pool thread, closing the connection it opened there."""

    def run() -> ServiceStatus:
        try:
            return check()
        finally:
            connections.close_all()

    return run


def _outcome(future: Future[ServiceStatus], deadline: float) -> ServiceStatus:
    try:
        return future.result(timeout=max(0.0, deadline - time.monotonic()))
    except FutureTimeout:
        return ServiceStatus(False, f"no answer within {CHECK_TIMEOUT_S} s")


def system_health() -> dict[str, ServiceStatus]:
    deadline = time.monotonic() + CHECK_TIMEOUT_S
    database_check = _checks.submit(_on_own_connection(database_status))
    broker = _outcome(_checks.submit(broker_status), deadline)
    # Without a broker the worker ping can only time out: say so instead of waiting.
    worker = worker_ping_cache.status() if broker.up else ServiceStatus(False, "broker is down")
    database = _outcome(database_check, deadline)
    return {"database": database, "broker": broker, "worker": worker}


def may_see_details(request: HttpRequest) -> bool:
    """Staff, and callers from ``HEALTH_NETWORKS``, may see which service is down."""
    address = ipaddress.ip_address(request.META.get("REMOTE_ADDR") or "0.0.0.0")  # noqa: S104
    networks = (ipaddress.ip_network(net, strict=False) for net in settings.HEALTH_NETWORKS)
    if any(address in network for network in networks):
        return True
    try:
        return bool(request.user.is_staff)
    except (DatabaseError, InterfaceError):  # the session or user table is what is down
        return False


@never_cache
@require_safe
def readyz(request: HttpRequest) -> JsonResponse:
    """200 when the database, the broker and a worker answer, else 503."""
    statuses = system_health()
    down = sorted(name for name, status in statuses.items() if not status.up)
    body: dict[str, object] = {"status": "unavailable" if down else "ok"}
    if may_see_details(request):
        body["down"] = down
        body["services"] = {name: status.as_dict() for name, status in statuses.items()}
    return JsonResponse(body, status=503 if down else 200)


@never_cache
@require_safe
def livez(request: HttpRequest) -> JsonResponse:
    """200 while the process serves requests; checks nothing else."""
    return JsonResponse({"status": "ok"})


class LivenessMiddleware:
    """Answers ``/livez`` first, so an orchestrator's probe (any ``Host``, plain http) gets
    200 whatever the other middleware would say; put it at the top of ``MIDDLEWARE``."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path_info == LIVENESS_PATH:
            return livez(request)
        return self.get_response(request)
