"""Estimation runs over the API: start (202, queued on commit), poll, figures, retry."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from lib.broker import WAITING_IN_PROCESS, runs_in_process
from planner.scenarios.models import EstimationRun, RunStatus, Scenario
from planner.scenarios.services import run_execute
from planner.scenarios.services.runs import DEFAULT_SAMPLES
from tests.planner.conftest import finished_run, scenario_add

pytestmark = pytest.mark.django_db

CENT = Decimal("0.01")


def _runs_url(scenario: Scenario) -> str:
    return f"/api/v1/scenarios/{scenario.pk}/runs/"


def test_run_start_is_a_202_and_queues_the_task_on_commit(
    requester_api: APIClient, scenario: Scenario, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = requester_api.post(_runs_url(scenario), {"seed": 42, "samples": 1000})
    assert response.status_code == 202, response.json()
    body = response.json()
    assert (body["status"], body["progress"], body["seed"], body["samples"]) == (
        "queued",
        0.0,
        42,
        1000,
    )
    assert (body["scenario"], body["result"], body["attempts"]) == (scenario.pk, None, 0)
    # Not yet sent (the commit has not run its callback): saved, waiting for a worker.
    assert (body["state"], body["dispatched_at"], body["heartbeat_at"]) == ("waiting", None, None)
    if runs_in_process():  # the embedded default: the task runs here once committed
        assert body["state_message"] == WAITING_IN_PROCESS
    else:
        assert "will start when workers are back" in body["state_message"]
    assert body["inputs"]["scenario"] == scenario.spec
    assert body["price"]["id"] == scenario.price_entry_id
    assert response["Location"].endswith(f"/api/v1/runs/{body['id']}/")
    assert len(callbacks) == 1  # the task is enqueued only once the row is committed
    assert EstimationRun.objects.get(pk=body["id"]).status == RunStatus.QUEUED


def test_run_start_without_a_body_picks_a_seed(
    requester_api: APIClient, scenario: Scenario
) -> None:
    response = requester_api.post(_runs_url(scenario))
    assert response.status_code == 202, response.json()
    body = response.json()
    assert body["samples"] == DEFAULT_SAMPLES
    assert isinstance(body["seed"], int)


@pytest.mark.parametrize(
    ("payload", "field", "reason"),
    [
        ({"samples": 5}, "samples", "between 100"),
        ({"samples": "many"}, "samples", "valid integer"),
        ({"seed": -1}, "seed", "between 0"),
        ({"seed": 2**64}, "seed", "between 0"),
        ({"seed": 1.5}, "seed", "valid integer"),
    ],
)
def test_run_start_bad_input_is_a_400_naming_the_field(
    requester_api: APIClient,
    scenario: Scenario,
    payload: dict[str, Any],
    field: str,
    reason: str,
) -> None:
    response = requester_api.post(_runs_url(scenario), payload)
    assert response.status_code == 400
    assert reason in response.json()[field][0]
    assert not EstimationRun.objects.exists()


def test_run_executed_by_the_worker_service_shows_its_figures(
    requester_api: APIClient, scenario: Scenario, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        started = requester_api.post(_runs_url(scenario), {"seed": 7, "samples": 1000}).json()
    run_execute(run_id=started["id"])  # what the Celery task runs

    response = requester_api.get(f"/api/v1/runs/{started['id']}/")
    assert response.status_code == 200
    run = response.json()
    assert (run["status"], run["progress"], run["progress_message"], run["error"]) == (
        "succeeded",
        1.0,
        "done",
        "",
    )
    assert run["attempts"] == 1
    assert run["estimator_version"]
    assert run["started_at"] is not None
    assert run["finished_at"] is not None
    assert run["result"]["gpu_hours"] > 0
    assert 0 < run["result"]["mfu"] < 1
    montecarlo, budget = run["montecarlo"], run["budget"]
    assert (montecarlo["seed"], montecarlo["samples"]) == (7, 1000)
    days = montecarlo["training_days"]
    assert days["p10"] <= days["p50"] <= days["p90"]
    # The cost is the GPU-hours priced at the scenario's price-book entry.
    assert scenario.price_entry is not None
    price = scenario.price_entry.price_per_accelerator_hour
    gpu_hours_p50 = Decimal(repr(montecarlo["gpu_hours"]["p50"]))
    assert budget["currency"] == "USD"
    assert abs(Decimal(budget["cost"]["p50"]) - gpu_hours_p50 * price) <= CENT
    assert Decimal(budget["cost"]["p10"]) <= Decimal(budget["cost"]["p50"])
    assert Decimal(budget["cost"]["p50"]) <= Decimal(budget["cost"]["p90"])


def test_a_finished_run_gives_clients_the_whole_run_margins_and_layouts_considered(
    requester_api: APIClient, scenario: Scenario, requester: User
) -> None:
    run = finished_run(scenario, requester)
    result = requester_api.get(f"/api/v1/runs/{run.pk}/").json()["result"]
    assert result == run.result  # the estimate reaches clients whole
    whole_run = result["whole_run"]
    total = whole_run["steady_state_days"] + sum(whole_run["parts_days"].values())
    assert total == pytest.approx(result["training_days"], rel=1e-9)
    assert set(whole_run["parts_gpu_hours"]) == set(whole_run["parts_days"])
    breakdown, margins = result["time_per_step_breakdown_s"], result["margins_applied"]
    assert set(margins) >= {"framework_overhead", "network_jitter", "network_jitter_scale"}
    assert breakdown["framework_overhead"] + breakdown["network_jitter"] == pytest.approx(
        breakdown["overheads"]
    )
    assert result["alternatives"]  # the scenario lets the search pick its layout
    for alternative in result["alternatives"]:
        assert alternative["why"]
        assert alternative["slower_by"] >= 0


def test_runs_of_a_scenario_and_the_run_list(
    requester: User, requester_api: APIClient, scenario: Scenario
) -> None:
    other = scenario_add(scenario.project, requester, "on 128", 128)
    mine = finished_run(scenario, requester)
    theirs = finished_run(other, requester)
    listed = requester_api.get(_runs_url(scenario)).json()
    assert [row["id"] for row in listed["results"]] == [mine.pk]
    everything = requester_api.get("/api/v1/runs/").json()
    assert {row["id"] for row in everything["results"]} == {mine.pk, theirs.pk}
    filtered = requester_api.get(f"/api/v1/runs/?scenario={other.pk}&status=succeeded").json()
    assert [row["id"] for row in filtered["results"]] == [theirs.pk]
    assert requester_api.get("/api/v1/runs/?status=lost").status_code == 400


def test_run_retry_of_a_succeeded_run_is_a_409(
    requester: User, requester_api: APIClient, scenario: Scenario
) -> None:
    run = finished_run(scenario, requester)
    response = requester_api.post(f"/api/v1/runs/{run.pk}/retry/")
    assert response.status_code == 409
    assert response.json()["code"] == "run_not_retryable"
    assert "only a failed run, or one that waited more than 60 s" in response.json()["detail"]
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED


def test_run_retry_of_a_failed_run_queues_it_again(
    requester: User,
    requester_api: APIClient,
    scenario: Scenario,
    django_capture_on_commit_callbacks: Any,
) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        started = requester_api.post(_runs_url(scenario), {"seed": 3, "samples": 500}).json()
    EstimationRun.objects.filter(pk=started["id"]).update(
        status=RunStatus.FAILED, error="worker lost", attempts=1
    )
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = requester_api.post(f"/api/v1/runs/{started['id']}/retry/")
    assert response.status_code == 202, response.json()
    body = response.json()
    assert (body["status"], body["error"], body["seed"]) == ("queued", "", 3)
    assert len(callbacks) == 1
    run_execute(run_id=started["id"])
    assert requester_api.get(f"/api/v1/runs/{started['id']}/").json()["attempts"] == 2


def test_run_list_runs_a_fixed_number_of_queries(
    requester: User,
    requester_api: APIClient,
    scenario: Scenario,
    django_assert_max_num_queries: Any,
) -> None:
    for seed in range(6):
        finished_run(scenario, requester, seed=seed)
    # One count for the pagination, one select joining scenario, project and organisation.
    with django_assert_max_num_queries(2):
        response = requester_api.get("/api/v1/runs/")
    assert response.json()["count"] == 6
    with django_assert_max_num_queries(4):  # + the scenario itself
        response = requester_api.get(_runs_url(scenario))
    assert response.json()["count"] == 6
