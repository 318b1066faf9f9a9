"""Comparisons: scenarios of one project chosen to be seen side by side."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction

from lib.actors import Actor, actor_user
from organisations.models import Role
from planner.common.access import role_assert
from planner.common.errors import PlannerError
from planner.scenarios.models import Comparison, Project, Scenario

#: Anyone who reads a project may save a comparison of it.
COMPARE_ROLES = (Role.REQUESTER, Role.APPROVER, Role.VIEWER, Role.PRICING_ADMIN)


@transaction.atomic
def comparison_create(
    *, user: Actor, project: Project, name: str, scenarios: Sequence[Scenario]
) -> Comparison:
    role_assert(user, project.organisation, COMPARE_ROLES, action="save comparisons")
    if not name.strip():
        raise PlannerError("must not be empty", field="name")
    if len(scenarios) < 2:
        raise PlannerError("pick at least two scenarios to compare", field="scenarios")
    foreign = [s.name for s in scenarios if s.project_id != project.pk]
    if foreign:
        raise PlannerError(f"belong to another project: {', '.join(foreign)}", field="scenarios")
    comparison = Comparison.objects.create(
        project=project, name=name.strip(), created_by=actor_user(user)
    )
    comparison.scenarios.set(scenarios)
    return comparison
