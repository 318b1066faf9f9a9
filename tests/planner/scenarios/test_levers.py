"""A run's levers: computed on the worker with the estimate, priced as the run is, shown on
the run page and in the API, and applied as a new scenario with that one change."""

from __future__ import annotations

import html
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from estimator.core import estimate
from estimator.core.levers import levers
from planner.common.errors import PlannerError
from planner.scenarios.budget_figures import cost_of
from planner.scenarios.models import EstimationRun, Project, Scenario
from planner.scenarios.services import scenario_create, scenario_duplicate, scenario_from_lever
from tests.planner.conftest import api_client, example_quote, run_finished, small_spec

pytestmark = pytest.mark.django_db


def _run(scenario: Scenario, user: User, capture: Any) -> EstimationRun:
    return run_finished(scenario, user, capture)


def test_a_run_stores_the_estimators_levers_priced_as_the_run(
    scenario: Scenario, requester: User, django_capture_on_commit_callbacks: Any
) -> None:
    run = _run(scenario, requester, django_capture_on_commit_callbacks)
    assert run.levers
    expected = levers(run.inputs["scenario"])["levers"]
    assert {lv["change"] for lv in run.levers} == {lv["change"] for lv in expected}
    price = Decimal(run.price["price_per_gpu_hour"])
    assert run.budget is not None
    baseline = Decimal(run.budget["cost"]["deterministic"])
    for lever in run.levers:
        again = estimate(lever["scenario"])
        assert lever["gpu_hours"] == pytest.approx(again["gpu_hours"], rel=1e-9, abs=0)
        assert Decimal(lever["cost"]) == cost_of(again["gpu_hours"], price, None)
        assert Decimal(lever["cost_saved"]) == baseline - Decimal(lever["cost"])
    fitting = [Decimal(lv["cost_saved"]) for lv in run.levers if lv["fits_in_memory"]]
    assert fitting == sorted(fitting, reverse=True)  # sorted by cost saved


def test_a_committed_quote_keeps_its_minimum_in_every_lever(
    prices: None, project: Project, requester: User, django_capture_on_commit_callbacks: Any
) -> None:
    quote = example_quote()
    scenario = scenario_create(
        user=requester,
        project=project,
        name="H100 quote",
        spec=small_spec("H100-SXM", 64),
        price_source="vendor_quote",
        price=quote,
    )
    run = _run(scenario, requester, django_capture_on_commit_callbacks)
    minimum = Decimal("4709376.00")  # 2.10 USD x 256 accelerators x 12 months x 730 h
    assert run.levers
    assert all(Decimal(lever["cost"]) >= minimum for lever in run.levers)


def test_applying_a_lever_makes_a_scenario_with_that_one_change(
    scenario: Scenario, requester: User, django_capture_on_commit_callbacks: Any
) -> None:
    run = _run(scenario, requester, django_capture_on_commit_callbacks)
    assert run.levers
    lever = run.levers[0]
    made = scenario_from_lever(user=requester, run=run, index=0)
    assert made.project == scenario.project
    assert made.spec == lever["scenario"]
    assert made.name == f"{scenario.name} · {lever['change']}"[:190]
    assert (made.price_source, made.price) == (scenario.price_source, scenario.price)
    again = scenario_from_lever(user=requester, run=run, index=0)
    assert again.name == f"{made.name} (2)"
    with pytest.raises(PlannerError) as refused:
        scenario_from_lever(user=requester, run=run, index=len(run.levers))
    assert refused.value.field == "lever"


def test_a_scenario_is_duplicated_by_hand(scenario: Scenario, requester: User) -> None:
    copy = scenario_duplicate(user=requester, scenario=scenario)
    assert copy.pk != scenario.pk
    assert copy.name == f"{scenario.name} (copy)"
    assert (copy.spec, copy.price, copy.pue) == (scenario.spec, scenario.price, scenario.pue)


def test_a_viewer_cannot_apply_or_duplicate(
    scenario: Scenario, requester: User, viewer: User, django_capture_on_commit_callbacks: Any
) -> None:
    run = _run(scenario, requester, django_capture_on_commit_callbacks)
    with pytest.raises(PlannerError):
        scenario_from_lever(user=viewer, run=run, index=0)
    with pytest.raises(PlannerError):
        scenario_duplicate(user=viewer, scenario=scenario)


def test_the_run_page_lists_levers_and_apply_makes_the_scenario(
    scenario: Scenario, requester: User, django_capture_on_commit_callbacks: Any
) -> None:
    run = _run(scenario, requester, django_capture_on_commit_callbacks)
    client = Client()
    client.force_login(requester)
    body = client.get(run.get_absolute_url()).content.decode()
    assert run.levers is not None
    assert body.count('data-testid="lever-row"') == len(run.levers)
    assert html.escape(run.levers[0]["change"]) in body
    response = client.post(reverse("planner:run-lever-apply", args=[run.pk, 0]))
    made = Scenario.objects.exclude(pk=scenario.pk).get()
    assert response["Location"] == made.get_absolute_url()
    response = client.post(reverse("planner:scenario-duplicate", args=[scenario.pk]))
    assert Scenario.objects.count() == 3


def test_the_api_returns_levers_and_applies_one(
    scenario: Scenario,
    requester: User,
    outsider: User,
    django_capture_on_commit_callbacks: Any,
) -> None:
    run = _run(scenario, requester, django_capture_on_commit_callbacks)
    client: APIClient = api_client(requester)
    data = client.get(f"/api/v1/runs/{run.pk}/").json()
    assert [lv["change"] for lv in data["levers"]] == [lv["change"] for lv in run.levers or []]
    response = client.post(f"/api/v1/runs/{run.pk}/levers/0/apply/")
    assert response.status_code == 201, response.json()
    assert response.json()["spec"] == (run.levers or [])[0]["scenario"]
    assert client.post(f"/api/v1/runs/{run.pk}/levers/999/apply/").status_code == 400
    assert client.post(f"/api/v1/scenarios/{scenario.pk}/duplicate/").status_code == 201
    other = api_client(outsider)
    assert other.post(f"/api/v1/runs/{run.pk}/levers/0/apply/").status_code == 404
    assert other.post(f"/api/v1/scenarios/{scenario.pk}/duplicate/").status_code == 404


def test_the_schema_documents_apply_and_duplicate_as_201(requester: User) -> None:
    client: APIClient = api_client(requester)
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    for path in ("/api/v1/runs/{id}/levers/{index}/apply/", "/api/v1/scenarios/{id}/duplicate/"):
        assert "201" in schema["paths"][path]["post"]["responses"], path
