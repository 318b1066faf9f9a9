"""The runs' outbox and the dispatcher: a broker that is down answers fast and loses nothing,
a run whose worker went quiet is queued again or failed, a superseded task does nothing.

The first tests stand the broker in with a ``publish`` that refuses, so they hold in the
embedded mode; the last has a real broker address where nothing listens, then the real broker,
``celery beat`` and a worker.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from pytest_django.fixtures import Settings

from lib.broker import WAITING_IN_PROCESS, waiting_message
from planner.scenarios.models import WORKER_LOST, EstimationRun, RunStatus, Scenario
from planner.scenarios.services import run_execute, run_start
from planner.scenarios.services.runs import runs_dispatch_pending, runs_recover_lost
from planner.tasks import dispatch_pending
from tests.planner.conftest import api_client
from tests.services import wait_for
from trainplan.celery import app as celery_app

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[3]
BROKER_DOWN = "redis://127.0.0.1:1/0"
SAVED = "Waiting for a worker: your run is saved and will start when workers are back."


@pytest.fixture
def eager(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(celery_app.conf, "task_always_eager", True)


@pytest.fixture
def broker_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr("lib.broker.publish", refuse)
    monkeypatch.setitem(celery_app.conf, "task_always_eager", False)  # a broker, and it is down


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _status(client: Client, run: EstimationRun) -> dict[str, Any]:
    return dict(client.get(reverse("planner:run-status", args=[run.pk])).json())


def _running(run: EstimationRun, heartbeat_age_s: float, attempts: int = 1) -> None:
    now = timezone.now()
    EstimationRun.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING,
        attempts=attempts,
        started_at=now - timedelta(seconds=heartbeat_age_s + 5),
        heartbeat_at=now - timedelta(seconds=heartbeat_age_s),
        progress=0.4,
        progress_message="Monte Carlo",
        dispatched_at=now,
    )


def test_a_run_started_while_the_broker_is_down_is_saved_and_sent_later(
    eager: None,
    broker_refuses: None,
    requester: User,
    scenario: Scenario,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    django_capture_on_commit_callbacks: Any,
) -> None:
    client = _client(requester)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("planner:run-start", args=[scenario.pk]), follow=True)
    assert response.status_code == 200
    run = EstimationRun.objects.get()
    assert (run.status, run.dispatched_at, run.attempts) == ("queued", None, 0)
    page = response.content.decode()
    assert "it will start when workers are back" in page  # the message after the redirect
    assert SAVED in page  # the progress bar
    assert (_status(client, run)["state"], _status(client, run)["state_message"]) == (
        "waiting",
        SAVED,
    )
    assert f"run {run.pk} is saved but its task was not sent" in caplog.text
    assert runs_dispatch_pending() == []  # still down: nothing lost, nothing sent

    monkeypatch.undo()
    monkeypatch.setitem(celery_app.conf, "task_always_eager", True)
    assert dispatch_pending()["runs_sent"] == [run.pk]
    run.refresh_from_db()
    assert (run.status, run.attempts) == ("succeeded", 1)
    assert run.dispatched_at is not None


def test_a_dispatched_run_no_worker_took_yet_is_waiting(
    requester: User, scenario: Scenario, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        run = run_start(user=requester, scenario=scenario, seed=1, samples=200)
    EstimationRun.objects.filter(pk=run.pk).update(dispatched_at=timezone.now())
    assert _status(_client(requester), run)["state_message"] == waiting_message()


def test_in_process_a_saved_run_does_not_wait_for_a_worker(
    eager: None,
    requester: User,
    scenario: Scenario,
    django_capture_on_commit_callbacks: Any,
) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        run = run_start(user=requester, scenario=scenario, seed=1, samples=200)
    message = _status(_client(requester), run)["state_message"]
    assert message == WAITING_IN_PROCESS
    assert "waiting for a worker" not in message.lower()
    assert "workers are back" not in message


@pytest.mark.django_db(transaction=True)  # commits as the embedded default does, at once
def test_in_process_the_api_answers_with_the_finished_run(
    eager: None, requester: User, scenario: Scenario
) -> None:
    client = api_client(requester)
    response = client.post(f"/api/v1/scenarios/{scenario.pk}/runs/", {"samples": 200})
    assert response.status_code == 202, response.json()
    body = response.json()
    assert (body["status"], body["state"]) == ("succeeded", "succeeded")
    assert "worker" not in body["state_message"].lower()


def test_a_run_whose_worker_went_quiet_shows_worker_lost_then_runs_again(
    eager: None,
    settings: Settings,
    requester: User,
    scenario: Scenario,
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.RUN_STALE_AFTER_S = 60
    with django_capture_on_commit_callbacks(execute=False):
        run = run_start(user=requester, scenario=scenario, seed=1, samples=200)
    client = _client(requester)
    _running(run, heartbeat_age_s=5)
    assert _status(client, run)["state"] == "running"
    assert runs_recover_lost() == ([], [])
    _running(run, heartbeat_age_s=61)
    status = _status(client, run)
    assert (status["status"], status["state"]) == ("running", "worker_lost")
    assert status["state_message"].startswith("Worker lost, retrying: no heartbeat for 61 s")
    page = client.get(run.get_absolute_url()).content.decode()
    assert "Worker lost, retrying" in page
    assert "40 %" not in page  # no frozen percentage

    old_task = EstimationRun.objects.get(pk=run.pk).task_id
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert runs_recover_lost() == ([run.pk], [])
    requeued = EstimationRun.objects.get(pk=run.pk)
    assert (requeued.status, requeued.progress_message) == ("queued", WORKER_LOST)
    assert requeued.task_id != old_task
    assert _status(client, run)["state_message"] == "Worker lost, retrying (attempt 2)…"
    assert run_execute(run_id=run.pk, task_id=old_task) is None  # the lost task, redelivered
    for callback in callbacks:
        callback()  # the dispatch: eager, so the run executes here
    done = EstimationRun.objects.get(pk=run.pk)
    assert (done.status, done.attempts) == ("succeeded", 2)


def test_a_run_that_lost_its_worker_too_often_fails_with_the_reason(
    settings: Settings, requester: User, scenario: Scenario, django_capture_on_commit_callbacks: Any
) -> None:
    settings.RUN_MAX_ATTEMPTS = 3
    with django_capture_on_commit_callbacks(execute=False):
        run = run_start(user=requester, scenario=scenario, seed=1, samples=200)
    _running(run, heartbeat_age_s=600, attempts=3)
    assert runs_recover_lost() == ([], [run.pk])
    failed = EstimationRun.objects.get(pk=run.pk)
    assert failed.status == RunStatus.FAILED
    assert "the worker running this estimation was lost 3 times" in failed.error


def test_a_superseded_task_leaves_the_run_alone(
    requester: User, scenario: Scenario, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        run = run_start(user=requester, scenario=scenario, seed=1, samples=200)
    assert run_execute(run_id=run.pk, task_id="an-earlier-dispatch") is None
    assert EstimationRun.objects.get(pk=run.pk).status == RunStatus.QUEUED
    done = run_execute(run_id=run.pk, task_id=run.task_id)
    assert done is not None
    assert done.status == RunStatus.SUCCEEDED


@pytest.mark.django_db(transaction=True)
def test_the_worker_beats_while_a_step_reports_no_progress(
    requester: User, scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patch:
        patch.setattr("planner.scenarios.services.runs.run_dispatch", lambda **kwargs: False)
        run = run_start(user=requester, scenario=scenario, seed=1, samples=200)
    beats: list[object] = []

    def silent_compute(run: EstimationRun, report: Callable[[float, str], None]) -> Any:
        first = EstimationRun.objects.get(pk=run.pk).heartbeat_at
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and len(set(beats)) < 3:
            beats.append(EstimationRun.objects.get(pk=run.pk).heartbeat_at)
            time.sleep(0.02)
        assert first is not None
        raise ValueError("stop here")

    monkeypatch.setattr("planner.scenarios.services.runs.run_compute", silent_compute)
    with pytest.raises(ValueError, match="stop here"):
        run_execute(run_id=run.pk, task_id=run.task_id, heartbeat_s=0.1)
    assert len(set(beats)) >= 3  # the claim's, then the heartbeat thread's


def test_the_dispatcher_is_on_the_beat_schedule() -> None:
    entry = django_settings.CELERY_BEAT_SCHEDULE["dispatch-pending"]
    assert entry == {"task": "planner.dispatch_pending", "schedule": 30}
    assert "planner.dispatch_pending" in celery_app.tasks


# --- With the real broker ----------------------------------------------------------------


@pytest.fixture
def celery_beat(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``celery -A trainplan beat`` with the dispatcher every second (it needs no database)."""
    env = {
        **os.environ,
        "REDIS_URL": django_settings.REDIS_URL,
        "TRAINPLAN_DISPATCH_INTERVAL_S": "1",
    }
    log = tmp_path / "beat.log"
    command = [sys.executable, "-m", "celery", "-A", "trainplan", "beat", "--loglevel=INFO"]
    command += ["--schedule", str(tmp_path / "beat-schedule")]
    with log.open("wb") as out:
        beat = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    yield beat
    beat.terminate()
    beat.wait(timeout=30)


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_with_the_broker_down_a_run_is_saved_fast_and_runs_when_it_is_back(
    requester: User,
    scenario: Scenario,
    monkeypatch: pytest.MonkeyPatch,
    celery_worker_factory: type,
    request: pytest.FixtureRequest,
) -> None:
    monkeypatch.setitem(celery_app.conf, "broker_url", BROKER_DOWN)
    client = _client(requester)
    api = Client()
    api.force_login(requester)
    started = time.monotonic()
    answer = api.post(
        f"/api/v1/scenarios/{scenario.pk}/runs/",
        {"seed": 5, "samples": 200},
        content_type="application/json",
    )
    api_s = time.monotonic() - started
    started = time.monotonic()
    page = client.post(reverse("planner:run-start", args=[scenario.pk]))
    page_s = time.monotonic() - started
    print(f"broker down: API start {api_s * 1000:.0f} ms, page start {page_s * 1000:.0f} ms")
    assert (answer.status_code, page.status_code) == (202, 302), answer.content
    assert api_s < 2, api_s
    assert page_s < 2, page_s
    runs = list(EstimationRun.objects.order_by("pk"))
    assert [(r.status, r.dispatched_at) for r in runs] == [("queued", None)] * 2
    assert SAVED in client.get(runs[1].get_absolute_url()).content.decode()

    monkeypatch.undo()  # the broker is back
    worker = celery_worker_factory()
    request.getfixturevalue("celery_beat")
    try:
        finished = lambda: all(r.is_finished for r in EstimationRun.objects.all())  # noqa: E731
        wait_for(finished, 60, "beat's dispatcher to send the runs and the worker to run them")
    finally:
        worker.stop()
    for run in EstimationRun.objects.all():
        assert (run.status, run.attempts) == ("succeeded", 1), run.error
        assert run.dispatched_at is not None


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_run_whose_message_the_broker_lost_is_sent_again_and_finishes(
    requester: User,
    scenario: Scenario,
    celery_worker_factory: type,
    request: pytest.FixtureRequest,
) -> None:
    """No worker runs; the run is sent (202); the queue is lost (``DEL celery``); beat's
    dispatcher sends it again under a new task id once the queue is empty, and a worker
    started afterwards finishes it."""
    api = Client()
    api.force_login(requester)
    answer = api.post(
        f"/api/v1/scenarios/{scenario.pk}/runs/", {"seed": 5}, content_type="application/json"
    )
    assert answer.status_code == 202, answer.content
    run = EstimationRun.objects.get()
    assert run.dispatched_at is not None
    first_task = run.task_id
    broker = redis.Redis.from_url(django_settings.REDIS_URL)
    assert broker.llen("celery") >= 1
    broker.delete("celery")  # the message is lost
    # Sent long enough ago to count as unclaimed (TRAINPLAN_JOB_UNCLAIMED_AFTER_S, 60 s).
    EstimationRun.objects.filter(pk=run.pk).update(
        dispatched_at=timezone.now() - timedelta(minutes=2)
    )
    assert api.get(f"/api/v1/runs/{run.pk}/").json()["status"] == "queued"
    request.getfixturevalue("celery_beat")
    worker = celery_worker_factory()
    try:
        wait_for(lambda: EstimationRun.objects.get().is_finished, 60, "the run to be re-sent")
    finally:
        worker.stop()
    run.refresh_from_db()
    assert (run.status, run.attempts) == ("succeeded", 1), run.error
    assert run.task_id != first_task


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_retry_sends_again_a_run_stuck_waiting(requester: User, scenario: Scenario) -> None:
    api = Client()
    api.force_login(requester)
    answer = api.post(
        f"/api/v1/scenarios/{scenario.pk}/runs/", {"seed": 5}, content_type="application/json"
    )
    run = EstimationRun.objects.get(pk=answer.json()["id"])
    retry = f"/api/v1/runs/{run.pk}/retry/"
    assert api.post(retry).status_code == 409  # just sent: waiting is not stuck
    EstimationRun.objects.filter(pk=run.pk).update(
        dispatched_at=timezone.now() - timedelta(minutes=2)
    )
    assert (
        _client(requester)
        .get(run.get_absolute_url())
        .content.decode()
        .count('data-testid="retry-button"')
        == 1
    )
    assert api.post(retry).status_code == 202
    run_again = EstimationRun.objects.get(pk=run.pk)
    assert run_again.task_id != run.task_id
    assert run_again.status == "queued"
    redis.Redis.from_url(django_settings.REDIS_URL).delete("celery")
