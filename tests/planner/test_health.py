import pytest
from django.test import Client

from planner.celery import app as celery_app

pytestmark = pytest.mark.django_db


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
    assert response.json()["down"] == ["broker", "worker"]
    assert "broker unreachable" in response.json()["services"]["broker"]["detail"]


@pytest.mark.redis
def test_healthz_is_503_naming_the_worker_when_none_runs(client: Client) -> None:
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["down"] == ["worker"]


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_healthz_is_200_with_a_real_worker(client: Client, celery_worker: object) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200, response.json()
    assert celery_worker.name in response.json()["services"]["worker"]["detail"]  # type: ignore[attr-defined]
