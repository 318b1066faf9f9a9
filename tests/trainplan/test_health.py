import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.test import Client
from pytest_django.fixtures import Settings

from trainplan import health
from trainplan.celery import app as celery_app

pytestmark = pytest.mark.django_db

# The readiness contract: a probe with a one-second timeout always gets its answer.
PROBE_TIMEOUT_S = 1.0


@pytest.fixture(autouse=True)
def fresh_worker_ping() -> Iterator[None]:
    health.worker_ping_cache.clear()
    yield
    health.worker_ping_cache.clear()


@pytest.fixture
def eager(monkeypatch: pytest.MonkeyPatch) -> None:
    """No broker or worker to wait for (the embedded default), whatever services run."""
    monkeypatch.setitem(celery_app.conf, "task_always_eager", True)


@pytest.fixture
def outsider(settings: Settings) -> None:
    """The test client's 127.0.0.1 is no longer a network that may see details."""
    settings.HEALTH_NETWORKS = []


def test_healthz_reports_every_service(client: Client) -> None:
    response = client.get("/healthz")
    body = response.json()
    assert set(body["services"]) == {"database", "broker", "worker"}
    assert body["services"]["database"]["status"] == "up"


def test_healthz_is_200_on_the_embedded_default(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(celery_app.conf, "task_always_eager", True)
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {**response.json(), "status": "ok", "down": []}


def test_healthz_is_503_naming_the_broker_when_it_is_down(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(celery_app.conf, "task_always_eager", False)
    monkeypatch.setitem(celery_app.conf, "broker_url", "redis://127.0.0.1:9/0")
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["status"] == "unavailable"
    assert response.json()["down"] == ["broker", "worker"]
    assert "broker unreachable" in response.json()["services"]["broker"]["detail"]


def test_readyz_and_healthz_answer_alike(client: Client, eager: None) -> None:
    ready, healthz = client.get("/readyz"), client.get("/healthz")
    assert ready.status_code == healthz.status_code == 200
    assert ready.json() == healthz.json()


def test_readyz_tells_outsiders_only_the_status(
    client: Client, outsider: None, eager: None
) -> None:
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_tells_outsiders_only_that_it_is_unavailable(
    client: Client, outsider: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(celery_app.conf, "task_always_eager", False)
    monkeypatch.setitem(celery_app.conf, "broker_url", "redis://127.0.0.1:9/0")
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {"status": "unavailable"}


def test_readyz_shows_staff_the_details_from_anywhere(client: Client, outsider: None) -> None:
    client.force_login(User.objects.create_user("ivan", is_staff=True))
    assert set(client.get("/readyz").json()["services"]) == {"database", "broker", "worker"}


def test_readyz_shows_other_users_only_the_status(
    client: Client, outsider: None, eager: None
) -> None:
    client.force_login(User.objects.create_user("maya"))
    assert client.get("/readyz").json() == {"status": "ok"}


def test_readyz_shows_details_to_a_configured_network(client: Client, settings: Settings) -> None:
    settings.HEALTH_NETWORKS = ["10.0.0.0/8"]
    assert "services" in client.get("/readyz", REMOTE_ADDR="10.1.2.3").json()
    assert "services" not in client.get("/readyz", REMOTE_ADDR="192.0.2.1").json()


def test_readyz_answers_in_time_when_the_broker_hangs(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    def hang() -> health.ServiceStatus:
        time.sleep(2)
        return health.ServiceStatus(True, "too late")

    monkeypatch.setattr(health, "broker_status", hang)
    started = time.monotonic()
    response = client.get("/readyz")
    elapsed = time.monotonic() - started
    assert response.status_code == 503
    assert response.json()["down"] == ["broker", "worker"]
    assert "no answer within" in response.json()["services"]["broker"]["detail"]
    assert elapsed < PROBE_TIMEOUT_S


def test_worker_ping_is_reused_until_it_is_old(monkeypatch: pytest.MonkeyPatch) -> None:
    pings: list[float] = []

    def ping() -> health.ServiceStatus:
        pings.append(time.monotonic())
        return health.ServiceStatus(True, "1 worker(s): w1")

    monkeypatch.setattr(health, "worker_status", ping)
    cache = health.WorkerPingCache(max_age_s=60)
    assert cache.status() == cache.status() == health.ServiceStatus(True, "1 worker(s): w1")
    assert len(pings) == 1
    cache.max_age_s = 0
    time.sleep(0.01)
    cache.status()
    assert len(pings) == 2


def test_livez_answers_without_checking_any_service(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail() -> None:
        raise AssertionError("liveness must not check services")

    monkeypatch.setattr(health, "system_health", fail)
    response = client.get("/livez", HTTP_HOST="10.0.0.7:8000")  # a pod address, not allowed
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_probes_are_exempt_from_the_https_redirect(settings: Settings) -> None:
    settings.SECURE_SSL_REDIRECT = True
    client = Client()  # builds its middleware with the redirect on
    assert client.get("/projects/").status_code == 301
    for path in ("/livez", "/readyz", "/healthz"):
        assert client.get(path).status_code in (200, 503), path


def _health_networks(value: str) -> subprocess.CompletedProcess[str]:
    code = "from django.conf import settings; print(settings.HEALTH_NETWORKS)"
    return subprocess.run(
        [sys.executable, "manage.py", "shell", "--no-imports", "-c", code],
        env={**os.environ, "TRAINPLAN_HEALTH_NETWORKS": value},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_health_networks_are_read_from_the_environment() -> None:
    result = _health_networks("10.0.0.0/8, 192.0.2.7")
    assert result.stdout.strip() == "['10.0.0.0/8', '192.0.2.7/32']", result.stderr


def test_a_mistyped_health_network_stops_the_start() -> None:
    result = _health_networks("10.0.0.300/8")
    assert result.returncode != 0
    assert "10.0.0.300/8" in result.stderr


# --- With the real services ---------------------------------------------------------------


def _probe(url: str) -> tuple[int, dict[str, object], float]:
    """GET with the probe's one-second timeout: a slower answer fails the test."""
    started = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=PROBE_TIMEOUT_S) as response:  # noqa: S310
            status, body = response.status, json.load(response)
    except urllib.error.HTTPError as error:
        status, body = error.code, json.load(error)
    return status, body, time.monotonic() - started


@pytest.mark.redis
def test_healthz_is_503_naming_the_worker_when_none_runs(client: Client) -> None:
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["down"] == ["worker"]


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_healthz_is_200_with_a_real_worker(client: Client, celery_worker: object) -> None:
    # An orchestrator acts on failureThreshold (3 by default) probes in a row, not one: the
    # first check after start-up opens its connections in a cold pool, which on a loaded
    # machine can pass the 0.3-s deadline. Three failures in a row fail the test.
    for _attempt in range(3):
        response = client.get("/healthz")
        if response.status_code == 200:
            break
        time.sleep(1)
    assert response.status_code == 200, response.json()
    assert celery_worker.name in response.json()["services"]["worker"]["detail"]  # type: ignore[attr-defined]


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_readyz_answers_within_a_second_with_real_services(
    live_server: object, celery_worker: object
) -> None:
    url = f"{live_server}/readyz"
    timings = []
    for _ in range(3):  # the first pings the workers, the others reuse that ping
        status, body, elapsed = _probe(url)
        assert status == 200, body
        timings.append(elapsed)
    print(f"\n[bench] /readyz, real services: {', '.join(f'{t * 1000:.0f} ms' for t in timings)}")
    _, _, livez = _probe(f"{live_server}/livez")
    print(f"[bench] /livez: {livez * 1000:.1f} ms")


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_readyz_answers_within_a_second_when_no_worker_runs(live_server: object) -> None:
    status, body, elapsed = _probe(f"{live_server}/readyz")
    assert status == 503
    assert body["down"] == ["worker"]
    print(f"\n[bench] /readyz, no worker: {elapsed * 1000:.0f} ms")
