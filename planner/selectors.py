"""Reads of the planner app, always scoped to the organisations the user belongs to.

A user who is not a member of an object's organisation cannot tell it exists: the
querysets below simply do not contain it, so views answer 404.
"""

from __future__ import annotations

from django.db.models import QuerySet

from lib.actors import Actor
from organisations.selectors import organisations_for
from planner.models import BudgetRequest, CapacityPlan
from planner.scenarios.selectors import projects_for
from planner.services.budget_rules import budget_requests_decidable


def capacity_plans_for(user: Actor) -> QuerySet[CapacityPlan]:
    """The capacity plans of the user's organisations, newest first."""
    return CapacityPlan.objects.filter(organisation__in=organisations_for(user)).select_related(
        "organisation", "project", "created_by"
    )


def budget_requests_for(user: Actor) -> QuerySet[BudgetRequest]:
    """The requests of the projects in the user's organisations (none for anonymous users)."""
    return BudgetRequest.objects.filter(project__in=projects_for(user))


def budget_requests_awaiting(
    user: Actor, requests: QuerySet[BudgetRequest]
) -> QuerySet[BudgetRequest]:
    """The submitted ``requests`` that ``user`` may still decide on, as one query.

    The rule (separation of duties, one decision per submission) and its query live together
    in :func:`planner.services.budget_rules.budget_requests_decidable`.
    """
    return budget_requests_decidable(user, requests)
