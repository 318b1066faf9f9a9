"""Text the database cannot store is a 400 naming the field on every planner write endpoint:
a NUL character (in text, in an id, anywhere in the scenario JSON) or text longer than its
column. The matrix is the pricing app's (``tests/pricing/api/inputs.py``).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework import serializers
from rest_framework.test import APIClient

from lib.inputs import StorableInput
from planner.budgets import serializers as budget_io
from planner.budgets import services
from planner.budgets.models import AuditEvent, BudgetDecision, BudgetRequest
from planner.scenarios import serializers as io
from planner.scenarios.models import Comparison, EstimationRun, Project, Scenario
from planner.scenarios.services import scenario_export
from pricing.api import serializers as pricing_io
from tests.planner.conftest import list_price, small_spec
from tests.pricing.api.inputs import (
    Endpoint,
    World,
    column_bounds_kept,
    long_cases,
    long_refused,
    nul_cases,
    nul_refused,
)

pytestmark = pytest.mark.django_db

TABLES = (Project, Scenario, Comparison, EstimationRun, BudgetRequest, BudgetDecision, AuditEvent)
TRANSITIONS = ("submit", "approve", "reject", "request-changes", "close")


def _none(world: World) -> dict[str, Any]:
    return {}


def _scenario_body(world: World) -> dict[str, Any]:
    return {
        "project": world["project"].pk,
        "name": "H100 on 128",
        "spec": small_spec("H100-SXM", 128),
        "price_source": "price_entry",
        "price_entry": list_price("H100-SXM").pk,
    }


def _transition(action: str) -> Endpoint:
    return Endpoint(
        f"budget-{action}",
        "post",
        lambda w: f"/api/v1/budgets/{w['budget'].pk}/{action}/",
        lambda w: {"comment": "Looks right"},
        budget_io.BudgetTransitionInput,
        TABLES,
    )


ENDPOINTS = [
    Endpoint(
        "project-create",
        "post",
        lambda w: "/api/v1/projects/",
        lambda w: {"organisation": w["project"].organisation_id, "name": "Mistral 7B"},
        io.ProjectInput,
        TABLES,
    ),
    Endpoint(
        "project-update",
        "patch",
        lambda w: f"/api/v1/projects/{w['project'].pk}/",
        _none,
        io.ProjectUpdateInput,
        TABLES,
    ),
    Endpoint(
        "scenario-create",
        "post",
        lambda w: "/api/v1/scenarios/",
        _scenario_body,
        io.ScenarioInput,
        TABLES,
    ),
    Endpoint(
        "scenario-update",
        "patch",
        lambda w: f"/api/v1/scenarios/{w['scenario'].pk}/",
        _none,
        io.ScenarioUpdateInput,
        TABLES,
    ),
    Endpoint(
        "scenario-import",
        "post",
        lambda w: f"/api/v1/projects/{w['project'].pk}/scenarios/import/",
        lambda w: scenario_export(w["scenario"]) | {"name": "Imported"},
        io.ScenarioDocument,
        TABLES,
    ),
    Endpoint(
        "run-start",
        "post",
        lambda w: f"/api/v1/scenarios/{w['scenario'].pk}/runs/",
        lambda w: {"seed": 3},
        io.RunStartInput,
        TABLES,
    ),
    Endpoint(
        "comparison-create",
        "post",
        lambda w: "/api/v1/comparisons/",
        lambda w: {
            "project": w["project"].pk,
            "name": "Side by side",
            "scenarios": [w["scenario"].pk],
        },
        io.ComparisonInput,
        TABLES,
    ),
    Endpoint(
        "budget-create",
        "post",
        lambda w: "/api/v1/budgets/",
        lambda w: {"run": w["run"].pk, "title": "Q3 budget", "justification": "Release"},
        budget_io.BudgetRequestInput,
        TABLES,
    ),
    Endpoint(
        "budget-update",
        "patch",
        lambda w: f"/api/v1/budgets/{w['budget'].pk}/",
        _none,
        budget_io.BudgetRequestUpdateInput,
        TABLES,
    ),
    *(_transition(action) for action in TRANSITIONS),
]


@pytest.fixture
def world(
    project: Project, scenario: Scenario, requester: User, budget_run: EstimationRun
) -> World:
    budget = services.budget_request_create(
        user=requester, run=budget_run, title="Llama budget", justification="Pre-training"
    )
    return {"project": project, "scenario": scenario, "run": budget_run, "budget": budget}


@pytest.mark.parametrize(("endpoint", "field"), list(nul_cases(ENDPOINTS)))
def test_api_nul_in_any_field_is_a_400_naming_it(
    requester_api: APIClient, world: World, endpoint: Endpoint, field: str
) -> None:
    nul_refused(requester_api, world, endpoint, field)


@pytest.mark.parametrize(("endpoint", "field", "limit"), list(long_cases(ENDPOINTS)))
def test_api_text_over_its_column_is_a_400_naming_it(
    requester_api: APIClient, world: World, endpoint: Endpoint, field: str, limit: int
) -> None:
    long_refused(requester_api, world, endpoint, field, limit)


@pytest.mark.parametrize(
    ("where", "spec_change"),
    [
        ("model.name", lambda spec: spec["model"] | {"name": "Llama\x00"}),
        ("model.notes\\x00", lambda spec: spec["model"] | {"notes\x00": 1}),
    ],
)
def test_api_nul_deep_in_the_spec_names_its_path(
    requester_api: APIClient, world: World, where: str, spec_change: Any
) -> None:
    body = _scenario_body(world)
    body["spec"]["model"] = spec_change(body["spec"])
    response = requester_api.post("/api/v1/scenarios/", body)
    assert response.status_code == 400
    assert response.json() == {"spec": [f"Null characters are not allowed (at {where})."]}


@pytest.mark.parametrize("levels", [33, 2000, 200_000])
def test_api_json_nested_too_deep_is_a_400_naming_the_limit(
    requester_api: APIClient, world: World, levels: int
) -> None:
    body = '{"organisation": %d, "name": "Deep", "notes": %s}' % (  # noqa: UP031
        world["project"].organisation_id,
        "[" * levels + "]" * levels,
    )
    response = requester_api.post("/api/v1/projects/", body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["detail"] == "JSON parse error - nested deeper than 32 levels"
    assert not Project.objects.filter(name="Deep").exists()


def test_api_nul_in_a_form_encoded_body_is_a_400(requester_api: APIClient, world: World) -> None:
    body = {"organisation": world["project"].organisation_id, "name": "Mistral\x00"}
    response = requester_api.post("/api/v1/projects/", body, format="multipart")
    assert response.status_code == 400
    assert response.json() == {"name": ["Null characters are not allowed."]}


@pytest.mark.parametrize(
    ("serializer", "model"),
    [
        (io.ProjectInput, Project),
        (io.ScenarioInput, Scenario),
        (io.ScenarioDocument, Scenario),
        (io.ComparisonInput, Comparison),
        (budget_io.BudgetRequestInput, BudgetRequest),
        (budget_io.BudgetRequestUpdateInput, BudgetRequest),
    ],
)
def test_api_every_text_field_is_bounded_by_its_column(serializer: Any, model: Any) -> None:
    assert column_bounds_kept(serializer, model) == []


def test_every_input_serializer_of_both_apps_applies_the_rule() -> None:
    """A serializer that parses requests (not named an output, with a writable field) derives
    from StorableInput."""
    modules = (io, budget_io, pricing_io)
    serializer_classes = [
        value
        for module in modules
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, serializers.Serializer)
        and value.__module__ == module.__name__
    ]
    inputs = [
        cls
        for cls in serializer_classes
        if not cls.__name__.endswith("Output")
        and any(not field.read_only for field in cls().fields.values())
    ]
    assert len(inputs) >= 20
    assert [cls.__name__ for cls in inputs if not issubclass(cls, StorableInput)] == []
