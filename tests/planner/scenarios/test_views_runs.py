"""The run pages: starting a run, its status for the progress bar, its figures, retrying.

Runs are started from the page or with ``run_start`` and executed with ``run_execute`` (the
worker's service) inside ``django_capture_on_commit_callbacks(execute=False)``, so the same
tests hold in the embedded mode (eager Celery) and on PostgreSQL + Redis.
"""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from lib.broker import WAITING_IN_PROCESS, runs_in_process
from planner.scenarios.models import EstimationRun, Scenario
from planner.scenarios.services import run_execute, run_start
from tests.planner.conftest import Capture, _budget, _client

pytestmark = pytest.mark.django_db


def test_a_run_starts_from_the_page_and_its_status_follows_it(
    requester: User, scenario: Scenario, django_capture_on_commit_callbacks: Capture
) -> None:
    client = _client(requester)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(reverse("planner:run-start", args=[scenario.pk]))
    run = EstimationRun.objects.get()
    assert response["Location"] == run.get_absolute_url()
    assert len(callbacks) == 1  # the task is queued only once the row is committed
    status_url = reverse("planner:run-status", args=[run.pk])
    assert client.get(status_url).json() == {
        "id": run.pk,
        "status": "queued",
        "status_label": "Queued",
        "state": "waiting",  # its task is not sent: the callback above did not run
        "state_message": WAITING_IN_PROCESS
        if runs_in_process()  # the embedded default: no worker exists or is needed
        else "Waiting for a worker: your run is saved and will start when workers are back.",
        "progress": 0.0,
        "progress_message": "",
        "error": "",
        "finished": False,
        "url": run.get_absolute_url(),
    }
    page = client.get(run.get_absolute_url()).content.decode()
    assert f'data-run-status-url="{status_url}"' in page  # the live progress bar polls it
    assert 'data-run-state="waiting"' in page
    run_execute(run_id=run.pk)
    status = client.get(status_url)
    assert status["Cache-Control"].startswith("max-age=0")
    assert (status.json()["status"], status.json()["progress"]) == ("succeeded", 1.0)
    assert (status.json()["state"], status.json()["state_message"]) == ("succeeded", "Succeeded")
    assert status.json()["finished"] is True


def test_the_run_page_shows_the_figures_needed_to_reproduce_it(
    requester: User, estimated: EstimationRun
) -> None:
    body = _client(requester).get(estimated.get_absolute_url()).content.decode()
    result, budget = estimated.result or {}, _budget(estimated)
    for shown in (
        f"{budget['training_days']['p10']:.1f}",
        f"{budget['training_days']['p90']:.1f}",
        f"{Decimal(budget['cost']['p50']):,.0f}",
        f"{Decimal(budget['requested']):,.0f}",
        f"{result['mfu'] * 100:.1f}",
        str(estimated.seed),
        estimated.estimator_version,
        f"<b>TP</b>{result['parallelism']['tp']}",
    ):
        assert shown in body, shown
    assert "data-run-status-url" not in body  # finished: no polling
    assert 'data-testid="memory-breakdown"' in body
    assert 'data-testid="step-breakdown"' in body


def test_the_run_page_shows_the_throughput_band_and_what_mfu_is_measured_against(
    requester: User, estimated: EstimationRun
) -> None:
    body = _client(requester).get(estimated.get_absolute_url()).content.decode()
    band = (estimated.montecarlo or {})["tokens_per_s_per_gpu"]
    assert band["p10"] < (estimated.result or {})["tokens_per_s_per_gpu"] < band["p90"]
    assert 'data-testid="throughput-band"' in body
    assert f"P10 {band['p10']:,.0f}" in body
    precision = (estimated.result or {})["mfu_peak"]["precision"].upper()
    assert f"against the {precision} peak" in body


def test_the_monte_carlos_warnings_reach_the_run_page(
    requester: User, estimated: EstimationRun
) -> None:
    montecarlo = dict(estimated.montecarlo or {})
    montecarlo["warnings"] = ["margins.network_jitter = 0.5 lies outside the sampled range"]
    EstimationRun.objects.filter(pk=estimated.pk).update(montecarlo=montecarlo)
    body = _client(requester).get(estimated.get_absolute_url()).content.decode()
    assert "margins.network_jitter = 0.5 lies outside the sampled range" in body


def test_a_failed_run_shows_its_reason_and_is_retried_with_the_same_seed(
    requester: User, scenario: Scenario, django_capture_on_commit_callbacks: Capture
) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        run = run_start(user=requester, scenario=scenario, seed=99, samples=400)
    # Frozen inputs the estimator refuses (as after an upgrade that tightened validation).
    inputs = json.loads(json.dumps(run.inputs))
    inputs["scenario"]["model"]["num_layers"] = -3
    EstimationRun.objects.filter(pk=run.pk).update(inputs=inputs)
    run_execute(run_id=run.pk)
    client = _client(requester)
    page = client.get(run.get_absolute_url()).content.decode()
    assert "model.num_layers: must be a positive integer, got -3" in page
    assert 'data-testid="retry-button"' in page
    status = client.get(reverse("planner:run-status", args=[run.pk])).json()
    assert (status["status"], status["finished"]) == ("failed", True)
    assert status["error"].startswith("model.num_layers")

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(reverse("planner:run-retry", args=[run.pk]))
    assert response["Location"] == run.get_absolute_url()
    assert len(callbacks) == 1
    run.refresh_from_db()
    assert (run.status, run.seed, run.error) == ("queued", 99, "")


def test_retrying_a_successful_run_is_refused_with_a_message(
    requester: User, estimated: EstimationRun
) -> None:
    client = _client(requester)
    response = client.post(reverse("planner:run-retry", args=[estimated.pk]), follow=True)
    assert "only a failed run, or one that waited more than" in response.content.decode()
    estimated.refresh_from_db()
    assert estimated.status == "succeeded"


def test_a_viewer_cannot_start_or_retry_runs(viewer: User, scenario: Scenario) -> None:
    client = _client(viewer)
    response = client.post(reverse("planner:run-start", args=[scenario.pk]))
    assert response.status_code == 403
    assert b"Only a requester" in response.content
    assert not EstimationRun.objects.exists()


def test_a_running_run_shows_its_percentage_and_a_lost_one_does_not(
    requester: User, scenario: Scenario, django_capture_on_commit_callbacks: Capture
) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        run = run_start(user=requester, scenario=scenario, seed=1, samples=200)
    now = timezone.now()
    running = {"status": "running", "progress": 0.42, "progress_message": "Monte Carlo"}
    EstimationRun.objects.filter(pk=run.pk).update(**running, started_at=now, heartbeat_at=now)
    client = _client(requester)
    page = client.get(run.get_absolute_url()).content.decode()
    assert ('data-run-state="running"' in page, "42 %" in page) == (True, True)
    stale = now - timedelta(minutes=5)
    EstimationRun.objects.filter(pk=run.pk).update(started_at=stale, heartbeat_at=stale)
    page = client.get(run.get_absolute_url()).content.decode()
    assert 'data-run-state="worker_lost"' in page
    assert "Worker lost, retrying: no heartbeat for 300 s." in page
    assert "42 %" not in page
