"""Comparisons over the API: scenarios side by side, the cheapest and the fastest marked."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from planner.scenarios.models import Comparison, EstimationRun, Project, Scenario
from planner.scenarios.services import comparison_create, project_create
from tests.planner.conftest import finished_run, scenario_add

pytestmark = pytest.mark.django_db

COMPARISONS = "/api/v1/comparisons/"


@pytest.fixture
def three_scenarios(requester: User, scenario: Scenario) -> list[Scenario]:
    """64 and 256 H100 with runs, and 128 H100 never run."""
    wide = scenario_add(scenario.project, requester, "256 H100", 256)
    finished_run(scenario, requester)
    finished_run(wide, requester)
    never_run = scenario_add(scenario.project, requester, "128 H100", 128)
    return [scenario, wide, never_run]


def _latest(scenario: Scenario) -> EstimationRun:
    run = scenario.runs.filter(status="succeeded").order_by("-finished_at").first()
    assert run is not None
    return run


def test_comparison_marks_the_cheapest_and_the_fastest(
    requester_api: APIClient, project: Project, three_scenarios: list[Scenario]
) -> None:
    payload = {
        "project": project.pk,
        "name": "How wide?",
        "scenarios": [s.pk for s in three_scenarios],
    }
    created = requester_api.post(COMPARISONS, payload)
    assert created.status_code == 201, created.json()
    response = requester_api.get(f"{COMPARISONS}{created.json()['id']}/")
    assert response.status_code == 200
    body = response.json()
    assert (body["name"], body["currency"]) == ("How wide?", "USD")
    rows = {row["scenario"]: row for row in body["rows"]}
    assert set(rows) == {s.pk for s in three_scenarios}

    ran = three_scenarios[:2]
    cost = {s.pk: Decimal(_latest(s).budget["cost"]["p50"]) for s in ran}  # type: ignore[index]
    days = {s.pk: _latest(s).budget["training_days"]["p50"] for s in ran}  # type: ignore[index]
    cheapest, fastest = min(cost, key=cost.__getitem__), min(days, key=days.__getitem__)
    assert cheapest != fastest  # the test tells the two flags apart
    assert [pk for pk, row in rows.items() if row["cheapest"]] == [cheapest]
    assert [pk for pk, row in rows.items() if row["fastest"]] == [fastest]
    for scenario in ran:
        row = rows[scenario.pk]
        assert row["run"] == _latest(scenario).pk
        assert Decimal(row["cost_p50"]) == cost[scenario.pk]
        assert row["training_days_p50"] == days[scenario.pk]
        assert row["cost_currency"] == "USD"
    never_run = rows[three_scenarios[2].pk]
    assert (never_run["run"], never_run["cost_p50"], never_run["training_days_p50"]) == (
        None,
        None,
        None,
    )
    assert not never_run["cheapest"]
    assert not never_run["fastest"]


@pytest.mark.parametrize(
    ("scenarios", "field", "reason"),
    [
        (lambda s, foreign: [s[0].pk], "scenarios", "at least two"),
        (lambda s, foreign: [s[0].pk, foreign.pk], "scenarios", "another project"),
        (lambda s, foreign: [s[0].pk, 999_999], "scenarios", "does not exist"),
        (lambda s, foreign: "all", "scenarios", "Expected a list"),
    ],
)
def test_comparison_bad_input_is_a_400_naming_the_field(
    requester: User,
    requester_api: APIClient,
    project: Project,
    three_scenarios: list[Scenario],
    scenarios: Any,
    field: str,
    reason: str,
) -> None:
    other = project_create(user=requester, organisation=project.organisation, name="Other")
    foreign = scenario_add(other, requester, "elsewhere", 64)
    payload = {"project": project.pk, "name": "x", "scenarios": scenarios(three_scenarios, foreign)}
    response = requester_api.post(COMPARISONS, payload)
    assert response.status_code == 400
    assert reason in " ".join(response.json()[field])
    assert not Comparison.objects.exists()


def test_comparison_with_an_empty_name_is_a_400(
    requester_api: APIClient, project: Project, three_scenarios: list[Scenario]
) -> None:
    payload = {"project": project.pk, "name": "", "scenarios": [s.pk for s in three_scenarios]}
    response = requester_api.post(COMPARISONS, payload)
    assert response.status_code == 400
    assert "name" in response.json()


def test_a_viewer_may_save_a_comparison(
    viewer_api: APIClient, project: Project, three_scenarios: list[Scenario]
) -> None:
    payload = {"project": project.pk, "name": "seen", "scenarios": [s.pk for s in three_scenarios]}
    assert viewer_api.post(COMPARISONS, payload).status_code == 201


def test_comparisons_cannot_be_changed_or_deleted(
    requester: User, requester_api: APIClient, project: Project, three_scenarios: list[Scenario]
) -> None:
    comparison = comparison_create(
        user=requester, project=project, name="fixed", scenarios=three_scenarios
    )
    url = f"{COMPARISONS}{comparison.pk}/"
    assert requester_api.patch(url, {"name": "changed"}).status_code == 405
    assert requester_api.delete(url).status_code == 405


def test_comparison_list_filters_and_runs_a_fixed_number_of_queries(
    requester: User,
    requester_api: APIClient,
    project: Project,
    three_scenarios: list[Scenario],
    django_assert_max_num_queries: Any,
) -> None:
    for number in range(5):
        comparison_create(
            user=requester, project=project, name=f"c{number}", scenarios=three_scenarios
        )
    # The project filter's lookup, a count, the comparisons with their project, and their
    # scenarios in one prefetch.
    with django_assert_max_num_queries(4):
        response = requester_api.get(f"{COMPARISONS}?project={project.pk}")
    body = response.json()
    assert body["count"] == 5
    assert all(
        sorted(row["scenarios"]) == sorted(s.pk for s in three_scenarios) for row in body["results"]
    )
