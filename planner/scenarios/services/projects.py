"""Projects (organisations and memberships live in :mod:`organisations`)."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

from django.db import transaction

from lib.actors import Actor, actor_user
from lib.updates import model_update
from organisations.models import Organisation
from planner.common.access import AUTHOR_ROLES, role_assert
from planner.common.errors import PlannerError
from planner.scenarios.models import Project
from pricing.currency import currency_code_check
from pricing.errors import PricingError

PROJECT_FIELDS = ("name", "goal", "deadline", "budget_ceiling", "currency")


def _currency_check(code: str, *, field: str) -> None:
    try:
        currency_code_check(code, field=field)
    except PricingError as error:
        raise PlannerError(error.message, field=field) from error


def _project_values_check(values: dict[str, Any]) -> None:
    if "name" in values and not str(values["name"]).strip():
        raise PlannerError("must not be empty", field="name")
    if "currency" in values:
        _currency_check(values["currency"], field="currency")
    ceiling = values.get("budget_ceiling")
    if ceiling is not None and Decimal(ceiling) <= 0:
        raise PlannerError(f"must be positive, got {ceiling}", field="budget_ceiling")
    deadline = values.get("deadline")
    if deadline is not None and not isinstance(deadline, date):
        raise PlannerError("must be a date (YYYY-MM-DD)", field="deadline")


def _name_taken(organisation: Organisation, name: str, exclude: int | None = None) -> bool:
    taken = Project.objects.filter(organisation=organisation, name=name)
    if exclude is not None:
        taken = taken.exclude(pk=exclude)
    return taken.exists()


@transaction.atomic
def project_create(
    *,
    user: Actor,
    organisation: Organisation,
    name: str,
    goal: str = "",
    deadline: date | None = None,
    budget_ceiling: Decimal | None = None,
    currency: str = "USD",
) -> Project:
    role_assert(user, organisation, AUTHOR_ROLES, action="create projects")
    values = {
        "name": name.strip(),
        "goal": goal,
        "deadline": deadline,
        "budget_ceiling": budget_ceiling,
        "currency": currency,
    }
    _project_values_check(values)
    if _name_taken(organisation, name.strip()):
        raise PlannerError(f"a project named {name!r} exists in {organisation}", field="name")
    owner = actor_user(user)
    assert owner is not None  # role_assert refused anonymous users
    return Project.objects.create(organisation=organisation, owner=owner, **values)


@transaction.atomic
def project_update(*, user: Actor, project: Project, **changes: Any) -> Project:
    role_assert(user, project.organisation, AUTHOR_ROLES, action="edit projects")
    unknown = set(changes) - set(PROJECT_FIELDS)
    if unknown:
        raise PlannerError("cannot be changed", field=sorted(unknown)[0])
    _project_values_check(changes)
    if "name" in changes and _name_taken(project.organisation, changes["name"], project.pk):
        raise PlannerError(f"a project named {changes['name']!r} exists", field="name")
    model_update(project, changes, allowed=PROJECT_FIELDS, refuse=PlannerError)
    return project


@transaction.atomic
def project_delete(*, user: Actor, project: Project) -> None:
    role_assert(user, project.organisation, AUTHOR_ROLES, action="delete projects")
    project.delete()
