"""Reads of the budgets room, scoped to the organisations the user belongs to."""

from __future__ import annotations

from django.db.models import QuerySet

from lib.actors import Actor
from planner.budgets.models import BudgetRequest
from planner.budgets.rules import budget_requests_decidable
from planner.scenarios.selectors import projects_for


def budget_requests_for(user: Actor) -> QuerySet[BudgetRequest]:
    """The requests of the projects in the user's organisations (none for anonymous users)."""
    return BudgetRequest.objects.filter(project__in=projects_for(user))


def budget_requests_awaiting(
    user: Actor, requests: QuerySet[BudgetRequest]
) -> QuerySet[BudgetRequest]:
    """The submitted ``requests`` that ``user`` may still decide on, as one query.

    The rule (separation of duties, one decision per submission) and its query live together
    in :func:`planner.budgets.rules.budget_requests_decidable`.
    """
    return budget_requests_decidable(user, requests)
