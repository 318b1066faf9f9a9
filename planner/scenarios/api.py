"""REST endpoints of the scenarios room: organisations, projects, scenarios, runs, comparisons.

Each read comes from a selector scoped to the user, each write parses its input and calls one
service. Every id a filter offers is scoped to the user's data: an id the user cannot see is
refused like one that does not exist (400 naming the filter).
"""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import Prefetch, QuerySet
from django.urls import reverse
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from lib.api import InputOutputSchema
from organisations.models import Membership, Organisation
from planner.common.api import (
    BAD_INPUT,
    NOT_ALLOWED,
    READ_AND_CREATE,
    OpenApiResponse,
    PlannerModelViewSet,
    SignedIn,
    scoped,
)
from planner.common.parsers import PLANNER_PARSERS
from planner.scenarios import selectors, services
from planner.scenarios import serializers as io
from planner.scenarios.models import Comparison, EstimationRun, Project, RunStatus, Scenario
from planner.scenarios.selectors import organisations_for, projects_for, scenarios_for


class ProjectFilter(django_filters.FilterSet):
    organisation = django_filters.ModelChoiceFilter(queryset=scoped(organisations_for))

    class Meta:
        model = Project
        fields = ["organisation"]


class ScenarioFilter(django_filters.FilterSet):
    project = django_filters.ModelChoiceFilter(queryset=scoped(projects_for))
    organisation = django_filters.ModelChoiceFilter(
        field_name="project__organisation", queryset=scoped(organisations_for)
    )

    class Meta:
        model = Scenario
        fields = ["project", "organisation", "price_source"]


class RunFilter(django_filters.FilterSet):
    scenario = django_filters.ModelChoiceFilter(queryset=scoped(scenarios_for))
    project = django_filters.ModelChoiceFilter(
        field_name="scenario__project", queryset=scoped(projects_for)
    )
    status = django_filters.ChoiceFilter(choices=RunStatus.choices)

    class Meta:
        model = EstimationRun
        fields = ["scenario", "project", "status"]


class ComparisonFilter(django_filters.FilterSet):
    project = django_filters.ModelChoiceFilter(queryset=scoped(projects_for))

    class Meta:
        model = Comparison
        fields = ["project"]


class OrganisationViewSet(viewsets.ReadOnlyModelViewSet):
    """The organisations the user belongs to, with the user's roles in each."""

    queryset = Organisation.objects.none()
    serializer_class = io.OrganisationOutput
    permission_classes = [SignedIn]

    def get_queryset(self) -> QuerySet[Organisation]:
        user = self.request.user
        own = Membership.objects.filter(user__pk=user.pk) if user.pk else Membership.objects.none()
        return selectors.organisations_for(user).prefetch_related(
            Prefetch("memberships", queryset=own, to_attr="user_memberships")
        )


class ProjectViewSet(PlannerModelViewSet):
    """Training proposals; filter by ``organisation``. Requesters write, members read."""

    queryset = Project.objects.none()
    filterset_class = ProjectFilter
    output_serializer_class = io.ProjectOutput
    input_serializer_class = io.ProjectInput
    update_input_serializer_class = io.ProjectUpdateInput

    def get_queryset(self) -> QuerySet[Project]:
        return selectors.projects_for(self.request.user)

    def service_create(self, data: dict[str, Any]) -> Project:
        return services.project_create(user=self.request.user, **data)

    def service_update(self, instance: Project, data: dict[str, Any]) -> Project:
        return services.project_update(user=self.request.user, project=instance, **data)

    def service_delete(self, instance: Project) -> None:
        services.project_delete(user=self.request.user, project=instance)

    @extend_schema(
        request=io.ScenarioDocument,
        responses={201: io.ScenarioOutput, 400: BAD_INPUT, 403: NOT_ALLOWED},
    )
    @action(detail=True, methods=["post"], url_path="scenarios/import", url_name="scenario-import")
    def scenario_import(self, request: Request, pk: str | None = None) -> Response:
        """Add a scenario to this project from a document that ``export`` produced."""
        project = self.get_object()
        document = io.ScenarioDocument(data=request.data)
        document.is_valid(raise_exception=True)
        scenario = services.scenario_import(
            user=request.user, project=project, document=dict(document.validated_data)
        )
        return Response(io.ScenarioOutput(scenario).data, status=status.HTTP_201_CREATED)


class ScenarioViewSet(PlannerModelViewSet):
    """Scenarios: the estimator's JSON plus where the price comes from; filter by ``project``.

    Spec errors name the key, as ``spec.<key>`` (for example ``spec.model.num_layers``).
    """

    queryset = Scenario.objects.none()
    filterset_class = ScenarioFilter
    output_serializer_class = io.ScenarioOutput
    input_serializer_class = io.ScenarioInput
    update_input_serializer_class = io.ScenarioUpdateInput

    def get_queryset(self) -> QuerySet[Scenario]:
        return selectors.scenarios_for(self.request.user)

    def service_create(self, data: dict[str, Any]) -> Scenario:
        price = io.price_choice(data)
        return services.scenario_create(user=self.request.user, **price, **data)

    def service_update(self, instance: Scenario, data: dict[str, Any]) -> Scenario:
        price = io.price_choice(data)
        return services.scenario_update(user=self.request.user, scenario=instance, **price, **data)

    def service_delete(self, instance: Scenario) -> None:
        services.scenario_delete(user=self.request.user, scenario=instance)

    @extend_schema(
        request=None, responses={201: io.ScenarioOutput, 400: BAD_INPUT, 403: NOT_ALLOWED}
    )
    @action(detail=True, methods=["post"])
    def duplicate(self, request: Request, pk: str | None = None) -> Response:
        """A copy of the scenario in its project, with its price, PUE and utilisation (201)."""
        copy = services.scenario_duplicate(user=request.user, scenario=self.get_object())
        return Response(io.ScenarioOutput(copy).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={200: io.ScenarioDocument})
    @action(detail=True, methods=["get"])
    def export(self, request: Request, pk: str | None = None) -> Response:
        """The scenario as a portable document; ``POST projects/{id}/scenarios/import/``
        reads it back."""
        return Response(services.scenario_export(self.get_object()))

    @extend_schema(methods=["GET"], responses=io.RunOutput(many=True), filters=False)
    @extend_schema(
        methods=["POST"],
        request=io.RunStartInput,
        responses={202: io.RunOutput, 400: BAD_INPUT, 403: NOT_ALLOWED},
    )
    @action(detail=True, methods=["get", "post"], url_path="runs", url_name="runs")
    def runs(self, request: Request, pk: str | None = None) -> Response:
        """GET: this scenario's runs, newest first. POST: start a run (202); the estimation
        is queued when the request commits; poll ``GET /api/v1/runs/{id}/``."""
        scenario = self.get_object()
        if request.method == "POST":
            return self._run_start(request, scenario)
        runs = selectors.runs_for(request.user).filter(scenario=scenario)
        page = self.paginate_queryset(runs)
        context = self.get_serializer_context()
        if page is None:
            return Response(io.RunOutput(runs, many=True, context=context).data)
        return self.get_paginated_response(io.RunOutput(page, many=True, context=context).data)

    def _run_start(self, request: Request, scenario: Scenario) -> Response:
        data = io.RunStartInput(data=request.data)
        data.is_valid(raise_exception=True)
        run = services.run_start(user=request.user, scenario=scenario, **data.validated_data)
        return run_accepted(request, run)


def run_accepted(request: Request, run: EstimationRun) -> Response:
    """202 with the run, and its address to poll in ``Location``."""
    location = request.build_absolute_uri(reverse("run-detail", args=[run.pk]))
    run.refresh_from_db()  # in-process tasks (the embedded default) may have run it already
    return Response(
        io.RunOutput(run).data, status=status.HTTP_202_ACCEPTED, headers={"Location": location}
    )


class RunViewSet(viewsets.ReadOnlyModelViewSet):
    """Estimation runs: status, progress and, once succeeded, the figures; filter by
    ``scenario``, ``project`` or ``status``."""

    queryset = EstimationRun.objects.none()
    serializer_class = io.RunOutput
    filterset_class = RunFilter
    permission_classes = [SignedIn]
    parser_classes = PLANNER_PARSERS

    def get_queryset(self) -> QuerySet[EstimationRun]:
        return selectors.runs_for(self.request.user)

    @extend_schema(
        request=None,
        responses={
            202: io.RunOutput,
            403: NOT_ALLOWED,
            409: OpenApiResponse(
                description="Only a failed run, or one stuck waiting for a worker, is retried"
            ),
        },
    )
    @action(detail=True, methods=["post"])
    def retry(self, request: Request, pk: str | None = None) -> Response:
        """Queue a failed run again, with the same inputs, price and seed."""
        run = services.run_retry(user=request.user, run=self.get_object())
        return run_accepted(request, run)

    @extend_schema(
        request=None,
        responses={201: io.ScenarioOutput, 400: BAD_INPUT, 403: NOT_ALLOWED},
    )
    @action(
        detail=True,
        methods=["post"],
        url_path=r"levers/(?P<index>[0-9]+)/apply",
        url_name="lever-apply",
    )
    def apply_lever(self, request: Request, pk: str | None = None, index: str = "0") -> Response:
        """Apply lever ``index`` of the run's ``levers``: a new scenario in the project, the
        run's scenario with that one change (201)."""
        run = self.get_object()
        number = int(index) if len(index) <= 9 else -1  # more digits: no such lever
        scenario = services.scenario_from_lever(user=request.user, run=run, index=number)
        return Response(io.ScenarioOutput(scenario).data, status=status.HTTP_201_CREATED)


@extend_schema_view(list=extend_schema(responses=io.ComparisonOutput(many=True)))
class ComparisonViewSet(PlannerModelViewSet):
    """Scenarios of one project side by side; the detail ranks them by their latest
    successful runs (costs in the organisation's base currency)."""

    queryset = Comparison.objects.none()
    filterset_class = ComparisonFilter
    output_serializer_class = io.ComparisonDetailOutput
    input_serializer_class = io.ComparisonInput
    http_method_names = READ_AND_CREATE
    schema = InputOutputSchema()

    def get_queryset(self) -> QuerySet[Comparison]:
        return selectors.comparisons_for(self.request.user).prefetch_related("scenarios")

    def get_serializer_class(self) -> Any:
        return io.ComparisonOutput if self.action == "list" else io.ComparisonDetailOutput

    def service_create(self, data: dict[str, Any]) -> Comparison:
        return services.comparison_create(user=self.request.user, **data)
