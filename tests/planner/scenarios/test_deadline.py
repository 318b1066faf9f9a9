"""A run against its project's deadline (planner/scenarios/deadline.py) on the run page, the
comparison page and the API: days from today, the verdict and the chance in time."""

from __future__ import annotations

import math
from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from estimator.core.deadline import MEETS, MISSES_P50, MISSES_P90, NO_DEADLINE, finish_probability
from planner.scenarios.deadline import days_available, run_deadline, run_deadline_json
from planner.scenarios.models import EstimationRun, Project, Scenario
from planner.scenarios.services import comparison_create
from planner.scenarios.views.figures import layout_compact
from tests.planner.conftest import _client, finished_run, scenario_add

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(scenario: Scenario, requester: User) -> EstimationRun:
    return finished_run(scenario, requester)


def _days(run: EstimationRun) -> dict[str, float]:
    assert run.montecarlo is not None
    return run.montecarlo["training_days"]


def _due_in(project: Project, days: int) -> None:
    project.deadline = timezone.localdate() + timedelta(days=days)
    project.save(update_fields=["deadline"])


def test_days_available_count_from_today(project: Project) -> None:
    assert days_available(project) is None
    project.deadline = date(2026, 6, 30)
    assert days_available(project, today=date(2026, 6, 1)) == 29
    assert days_available(project, today=date(2026, 7, 2)) == -2


def test_a_run_without_a_deadline_says_so(run: EstimationRun) -> None:
    check = run_deadline(run)
    assert check is not None
    assert (check.verdict, check.text, check.probability) == (NO_DEADLINE, "no deadline set", None)


def test_the_verdict_follows_the_days_left(run: EstimationRun) -> None:
    days, project = _days(run), run.scenario.project
    assert math.floor(days["p50"]) >= 1
    cases = [(math.ceil(days["p90"]), MEETS), (math.floor(days["p50"]) - 1, MISSES_P50)]
    if math.ceil(days["p50"]) < days["p90"]:
        cases.append((math.ceil(days["p50"]), MISSES_P90))
    for left, verdict in cases:
        _due_in(project, left)
        check = run_deadline(run, project=project)
        assert check is not None
        assert (check.days_available, check.verdict) == (left, verdict)
        quantiles = run.montecarlo["training_days_quantiles"]  # type: ignore[index]
        assert check.probability == finish_probability(quantiles, left)


def test_a_run_before_the_quantiles_has_a_verdict_without_a_chance(run: EstimationRun) -> None:
    assert run.montecarlo is not None
    del run.montecarlo["training_days_quantiles"]
    _due_in(run.scenario.project, math.ceil(_days(run)["p90"]))
    check = run_deadline(run)
    assert check is not None
    assert (check.verdict, check.probability, check.probability_text) == (MEETS, None, "")


def test_the_run_page_shows_the_verdict_and_the_chance(run: EstimationRun, requester: User) -> None:
    left = math.floor(_days(run)["p50"]) - 1
    _due_in(run.scenario.project, left)
    page = _client(requester).get(run.get_absolute_url()).content.decode()
    shown = page.partition('data-testid="run-deadline"')[2].partition("</div>")[0]
    assert 'data-verdict="misses_p50"' in shown
    assert "misses at P50" in shown
    check = run_deadline(run)
    assert check is not None
    assert f"{check.probability_text} chance in time" in shown


def test_the_run_api_has_the_deadline(
    run: EstimationRun, requester_api: APIClient, project: Project
) -> None:
    _due_in(project, math.ceil(_days(run)["p90"]))
    body = requester_api.get(f"/api/v1/runs/{run.pk}/").json()
    assert body["deadline"] == run_deadline_json(run)
    assert body["deadline"]["verdict"] == MEETS
    assert body["deadline"]["deadline"] == project.deadline.isoformat()  # type: ignore[union-attr]
    assert 0.9 <= body["deadline"]["probability"] <= 1.0


@pytest.fixture
def two_runs(scenario: Scenario, requester: User) -> list[EstimationRun]:
    """64 H100 (the scenario) and 256 H100: the wider one finishes well before the other."""
    wide = scenario_add(scenario.project, requester, "256 H100", 256)
    return [finished_run(scenario, requester), finished_run(wide, requester)]


def _deadline_between(runs: list[EstimationRun]) -> int:
    """Days that the wide run meets at P90 and the narrow one misses at P50."""
    narrow, wide = (_days(run) for run in runs)
    left = math.ceil(wide["p90"])
    assert left < narrow["p50"], (wide, narrow)
    return left


def test_the_comparison_page_has_layout_speed_budget_and_deadline_columns(
    two_runs: list[EstimationRun], requester: User, project: Project
) -> None:
    _due_in(project, _deadline_between(two_runs))
    url = reverse("planner:project-compare", args=[project.pk])
    query = "&".join(f"scenario={run.scenario_id}" for run in two_runs)
    page = _client(requester).get(f"{url}?{query}").content.decode()
    rows = {
        int(row.partition('data-scenario-id="')[2].partition('"')[0]): row
        for row in page.split('data-testid="comparison-row"')[1:]
    }
    for run, verdict in zip(two_runs, (MISSES_P50, MEETS), strict=True):
        row, result, budget = rows[run.scenario_id], run.result or {}, run.budget or {}
        assert layout_compact(result["parallelism"]) in row
        speed = row.partition('data-testid="compare-tokens-per-s">')[2].partition("<")[0]
        assert float(speed.replace(",", "")) == pytest.approx(result["tokens_per_s_per_gpu"], 0.5)
        requested = row.partition('data-testid="compare-requested">')[2].partition("<")[0]
        assert Decimal(requested.replace(",", "")) == Decimal(budget["requested"]).quantize(1)
        assert f'data-verdict="{verdict}"' in row


def test_the_comparison_api_has_layout_speed_budget_and_deadline(
    two_runs: list[EstimationRun], requester: User, requester_api: APIClient, project: Project
) -> None:
    _due_in(project, _deadline_between(two_runs))
    scenarios = [run.scenario for run in two_runs]
    comparison = comparison_create(user=requester, project=project, name="W", scenarios=scenarios)
    body = requester_api.get(f"/api/v1/comparisons/{comparison.pk}/").json()
    rows = {row["run"]: row for row in body["rows"]}
    for run, verdict in zip(two_runs, (MISSES_P50, MEETS), strict=True):
        row, result = rows[run.pk], run.result or {}
        assert row["layout"] == result["parallelism"]
        assert row["tokens_per_s_per_gpu"] == result["tokens_per_s_per_gpu"]
        assert Decimal(row["requested"]) == Decimal((run.budget or {})["requested"])
        assert row["deadline"]["verdict"] == verdict
        assert row["deadline"]["probability"] == run_deadline_json(run)["probability"]  # type: ignore[index]


def test_the_project_page_gives_each_scenario_its_verdict(
    two_runs: list[EstimationRun], requester: User
) -> None:
    project = two_runs[0].scenario.project
    _due_in(project, _deadline_between(two_runs))
    page = _client(requester).get(project.get_absolute_url()).content.decode()
    for run in two_runs:
        row = page.partition(f'data-scenario-id="{run.scenario_id}"')[2].partition("</tr>")[0]
        check = run_deadline(run)
        assert check is not None
        shown = row.partition('data-testid="row-deadline"')[2]
        assert f'data-verdict="{check.verdict}"' in shown
        assert f"{check.probability_text} chance in time" in shown
    verdicts = {run_deadline(run).verdict for run in two_runs}  # type: ignore[union-attr]
    assert verdicts == {MEETS, MISSES_P50}


def test_the_project_page_says_nothing_of_a_deadline_it_does_not_have(
    run: EstimationRun, requester: User
) -> None:
    page = _client(requester).get(run.scenario.project.get_absolute_url()).content.decode()
    assert 'data-testid="row-deadline"' not in page


def test_the_dashboard_says_whether_the_fastest_scenario_meets_the_deadline(
    two_runs: list[EstimationRun], requester: User
) -> None:
    project = two_runs[0].scenario.project
    _due_in(project, _deadline_between(two_runs))
    page = _client(requester).get(reverse("planner:project-list")).content.decode()
    shown = page.partition('data-testid="fastest-deadline"')[2].partition("</div>")[0]
    assert f'data-verdict="{MEETS}"' in shown  # the 256-H100 run, the fastest, meets it
