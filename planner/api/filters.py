"""Query filters of the planner endpoints; every id choice is scoped to the user's data.

An id the user cannot see is refused like one that does not exist (400 naming the filter).
"""

from __future__ import annotations

import django_filters
from django.db.models import QuerySet

from planner.common.api import request_user, scoped
from planner.models import BudgetRequest, BudgetState
from planner.scenarios.selectors import projects_for
from planner.selectors import budget_requests_awaiting


class BudgetRequestFilter(django_filters.FilterSet):
    project = django_filters.ModelChoiceFilter(queryset=scoped(projects_for))
    state = django_filters.ChoiceFilter(choices=BudgetState.choices)
    awaiting = django_filters.ChoiceFilter(
        choices=[("me", "me")],
        method="awaiting_filter",
        label="me: submitted requests the user may still approve, reject or send back",
    )

    class Meta:
        model = BudgetRequest
        fields = ["project", "state", "awaiting"]

    def awaiting_filter(
        self, requests: QuerySet[BudgetRequest], name: str, value: str
    ) -> QuerySet[BudgetRequest]:
        return budget_requests_awaiting(request_user(self.request), requests)
