"""lib.updates: one way to update a row and describe the change for the audit trail."""

from __future__ import annotations

from decimal import Decimal

import pytest
from pytest_django import DjangoAssertNumQueries

from lib.updates import Change, audit_diff, audit_value, model_update
from planner.common.errors import PlannerError
from planner.scenarios.models import Project
from pricing.errors import PricingError

pytestmark = pytest.mark.django_db

FIELDS = ("name", "goal", "budget_ceiling")


def test_model_update_saves_only_the_changed_fields(project: Project) -> None:
    stale = Project.objects.get(pk=project.pk)
    Project.objects.filter(pk=project.pk).update(goal="written by someone else")
    changes = model_update(
        stale, {"name": "Renamed", "goal": stale.goal}, allowed=FIELDS, refuse=PlannerError
    )
    assert changes == {"name": Change(project.name, "Renamed")}
    project.refresh_from_db()
    # The stale copy's goal was equal to its own value, so it is not written over the other.
    assert (project.name, project.goal) == ("Renamed", "written by someone else")


def test_model_update_moves_updated_at(project: Project) -> None:
    before = project.updated_at
    model_update(project, {"goal": "a new goal"}, allowed=FIELDS, refuse=PlannerError)
    project.refresh_from_db()
    assert project.updated_at > before


def test_model_update_with_nothing_changed_writes_nothing(
    project: Project, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    with django_assert_num_queries(0):
        assert (
            model_update(project, {"name": project.name}, allowed=FIELDS, refuse=PlannerError) == {}
        )


@pytest.mark.parametrize("refuse", [PlannerError, PricingError])
def test_model_update_refuses_a_field_outside_allowed_with_the_apps_error(
    project: Project, refuse: type[PlannerError] | type[PricingError]
) -> None:
    with pytest.raises(refuse) as raised:
        model_update(project, {"name": "x", "owner_id": 1}, allowed=FIELDS, refuse=refuse)
    assert raised.value.field == "owner_id"
    project.refresh_from_db()
    assert project.name != "x"  # refused before anything was set or saved


def test_audit_value_makes_decimals_rows_and_lists_json_safe(project: Project) -> None:
    assert audit_value(Decimal("1.50")) == "1.50"
    assert audit_value(project) == f"Project {project.pk}"
    assert audit_value([Decimal("2"), (3, Decimal("4.0"))]) == ["2", [3, "4.0"]]
    assert audit_value("text") == "text"


def test_audit_diff_pairs_before_and_after() -> None:
    diff = audit_diff(
        {"budget_ceiling": Change(Decimal("10"), Decimal("12.5")), "name": Change("a", "b")}
    )
    assert diff == {"budget_ceiling": ["10", "12.5"], "name": ["a", "b"]}
