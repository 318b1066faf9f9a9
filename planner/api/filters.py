"""Query filters of the planner endpoints; every id choice is scoped to the user's data.

An id the user cannot see is refused like one that does not exist (400 naming the filter).
"""

from __future__ import annotations

from typing import Any

import django_filters
from django.contrib.auth.models import AnonymousUser
from django.db.models import QuerySet
from django.http import HttpRequest

from planner import selectors
from planner.models import (
    BudgetRequest,
    BudgetState,
    Comparison,
    EstimationRun,
    Organisation,
    Project,
    RunStatus,
    Scenario,
)
from planner.selectors import budget_requests_awaiting


def _viewer(request: HttpRequest | None) -> Any:
    return request.user if request is not None else AnonymousUser()


def _organisations(request: HttpRequest | None) -> QuerySet[Organisation]:
    return selectors.organisations_for(_viewer(request))


def _projects(request: HttpRequest | None) -> QuerySet[Project]:
    return selectors.projects_for(_viewer(request))


def _scenarios(request: HttpRequest | None) -> QuerySet[Scenario]:
    return selectors.scenarios_for(_viewer(request))


class ProjectFilter(django_filters.FilterSet):
    organisation = django_filters.ModelChoiceFilter(queryset=_organisations)

    class Meta:
        model = Project
        fields = ["organisation"]


class ScenarioFilter(django_filters.FilterSet):
    project = django_filters.ModelChoiceFilter(queryset=_projects)
    organisation = django_filters.ModelChoiceFilter(
        field_name="project__organisation", queryset=_organisations
    )

    class Meta:
        model = Scenario
        fields = ["project", "organisation", "price_source"]


class RunFilter(django_filters.FilterSet):
    scenario = django_filters.ModelChoiceFilter(queryset=_scenarios)
    project = django_filters.ModelChoiceFilter(field_name="scenario__project", queryset=_projects)
    status = django_filters.ChoiceFilter(choices=RunStatus.choices)

    class Meta:
        model = EstimationRun
        fields = ["scenario", "project", "status"]


class ComparisonFilter(django_filters.FilterSet):
    project = django_filters.ModelChoiceFilter(queryset=_projects)

    class Meta:
        model = Comparison
        fields = ["project"]


class BudgetRequestFilter(django_filters.FilterSet):
    project = django_filters.ModelChoiceFilter(queryset=_projects)
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
        return budget_requests_awaiting(_viewer(self.request), requests)
