"""REST endpoints of the planner: each read comes from a selector scoped to the user, each
write parses its input and calls one service."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.models import Prefetch, QuerySet
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from lib.api import InputOutputSchema
from planner import selectors, services
from planner.api import budget_serializers as budget_io
from planner.api import capacity_serializers as capacity_io
from planner.api import filters
from planner.capacity import services as capacity_plans
from planner.common.api import PlannerModelViewSet, SignedIn
from planner.common.parsers import PLANNER_PARSERS
from planner.models import (
    AuditEvent,
    BudgetDecision,
    BudgetRequest,
    CapacityPlan,
    Comparison,
    EstimationRun,
    Membership,
    Organisation,
    Project,
    Scenario,
)
from planner.scenarios import serializers as io
from planner.selectors import budget_requests_for

READ_AND_CREATE = ["get", "post", "head", "options"]
READ_CREATE_AND_PATCH = [*READ_AND_CREATE, "patch"]
BAD_INPUT = OpenApiResponse(description="A field is missing, malformed or refused; it is named")
NOT_ALLOWED = OpenApiResponse(description="The user's role in the organisation does not allow it")


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
    filterset_class = filters.ProjectFilter
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
    filterset_class = filters.ScenarioFilter
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
    return Response(
        io.RunOutput(run).data, status=status.HTTP_202_ACCEPTED, headers={"Location": location}
    )


class RunViewSet(viewsets.ReadOnlyModelViewSet):
    """Estimation runs: status, progress and, once succeeded, the figures; filter by
    ``scenario``, ``project`` or ``status``."""

    queryset = EstimationRun.objects.none()
    serializer_class = io.RunOutput
    filterset_class = filters.RunFilter
    permission_classes = [SignedIn]
    parser_classes = PLANNER_PARSERS

    def get_queryset(self) -> QuerySet[EstimationRun]:
        return selectors.runs_for(self.request.user)

    @extend_schema(
        request=None,
        responses={
            202: io.RunOutput,
            403: NOT_ALLOWED,
            409: OpenApiResponse(description="Only a failed run can be retried"),
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
    filterset_class = filters.ComparisonFilter
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


TransitionService = Callable[..., BudgetRequest]
TRANSITION_RESPONSES = {
    200: budget_io.BudgetRequestDetailOutput,
    400: BAD_INPUT,
    403: OpenApiResponse(
        description="The user's role does not allow it (code not_allowed), or the user created "
        "or edited the request and so may not decide on it (code separation_of_duties)"
    ),
    409: OpenApiResponse(
        description="The request is not in a state that allows it (code transition_refused); "
        "the detail says what state it is in, and who moved it there"
    ),
}


def _transition_schema(summary: str) -> Any:
    return extend_schema(
        summary=summary, request=budget_io.BudgetTransitionInput, responses=TRANSITION_RESPONSES
    )


@extend_schema_view(list=extend_schema(responses=budget_io.BudgetRequestOutput(many=True)))
class BudgetRequestViewSet(PlannerModelViewSet):
    """Budget requests and their approval; filter by ``project``, ``state`` or
    ``awaiting=me`` (what the user may decide on now).

    ``state`` is read-only: it moves only through the transition endpoints (``submit``,
    ``approve``, ``reject``, ``request-changes``, ``close``). A request is never deleted.

    A request for a run with a blocking warning (it does not fit in memory) is refused with
    a 400 on ``run``, when created or submitted, unless it gives ``override_reason``; the
    detail's ``warnings`` lists the run's warnings, and the snapshot keeps them.
    """

    queryset = BudgetRequest.objects.none()
    filterset_class = filters.BudgetRequestFilter
    output_serializer_class = budget_io.BudgetRequestDetailOutput
    input_serializer_class = budget_io.BudgetRequestInput
    update_input_serializer_class = budget_io.BudgetRequestUpdateInput
    http_method_names = READ_CREATE_AND_PATCH

    def get_queryset(self) -> QuerySet[BudgetRequest]:
        requests = (
            budget_requests_for(self.request.user)
            .select_related("project", "created_by")
            .prefetch_related(
                Prefetch("alternatives", queryset=EstimationRun.objects.only("pk")),
                Prefetch("decisions", queryset=BudgetDecision.objects.select_related("approver")),
            )
        )
        if self.action == "list":
            return requests.defer("snapshot")  # listed without it; it can be large
        return requests.prefetch_related(
            Prefetch("audit_events", queryset=AuditEvent.objects.select_related("actor"))
        )

    def get_serializer_class(self) -> Any:
        if self.action == "list":
            return budget_io.BudgetRequestOutput
        return budget_io.BudgetRequestDetailOutput

    def output(self, instance: Any, code: int = status.HTTP_200_OK) -> Response:
        # Read back what the service saved, with the decisions and timeline it appended.
        return super().output(self.get_queryset().get(pk=instance.pk), code)

    def service_create(self, data: dict[str, Any]) -> BudgetRequest:
        return services.budget_request_create(user=self.request.user, **data)

    def service_update(self, instance: BudgetRequest, data: dict[str, Any]) -> BudgetRequest:
        return services.budget_request_update(user=self.request.user, request=instance, **data)

    def _transition(self, service: TransitionService) -> Response:
        budget = self.get_object()
        body = budget_io.BudgetTransitionInput(data=self.request.data)
        body.is_valid(raise_exception=True)
        changed = service(user=self.request.user, request=budget, **body.validated_data)
        return self.output(changed)

    @_transition_schema("Submit a draft, or a request sent back, to the approvers")
    @action(detail=True, methods=["post"])
    def submit(self, request: Request, pk: str | None = None) -> Response:
        """Freeze the snapshot (``snapshot_sha256``) and send the request for approval."""
        return self._transition(services.budget_request_submit)

    @_transition_schema("Approve a submitted request")
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, pk: str | None = None) -> Response:
        """Record an approval; the request stays submitted until it has all it needs
        (``approvals_required``), then it is approved."""
        return self._transition(services.budget_request_approve)

    @_transition_schema("Reject a submitted request (a comment is required)")
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: str | None = None) -> Response:
        return self._transition(services.budget_request_reject)

    @_transition_schema("Send a submitted request back for changes (a comment is required)")
    @action(detail=True, methods=["post"], url_path="request-changes", url_name="request-changes")
    def request_changes(self, request: Request, pk: str | None = None) -> Response:
        return self._transition(services.budget_request_request_changes)

    @_transition_schema("Close an approved budget: the training is done or cancelled")
    @action(detail=True, methods=["post"])
    def close(self, request: Request, pk: str | None = None) -> Response:
        return self._transition(services.budget_request_close)


@extend_schema_view(
    list=extend_schema(responses=capacity_io.CapacityPlanListOutput(many=True)),
    retrieve=extend_schema(responses=capacity_io.CapacityPlanOutput),
)
class CapacityPlanViewSet(viewsets.ReadOnlyModelViewSet):
    """Capacity plans: "train N tokens by date D within budget B: on what?". A POST saves the
    plan and queues its search on the workers (202); poll ``GET /api/v1/capacity-plans/{id}/``
    for ``status`` and ``progress``, then read ``options`` and ``frontier``."""

    queryset = CapacityPlan.objects.none()
    permission_classes = [SignedIn]
    parser_classes = PLANNER_PARSERS

    def get_queryset(self) -> QuerySet[CapacityPlan]:
        return selectors.capacity_plans_for(self.request.user)

    def get_serializer_class(self) -> Any:
        if self.action == "list":
            return capacity_io.CapacityPlanListOutput
        return capacity_io.CapacityPlanOutput

    @extend_schema(
        request=capacity_io.CapacityPlanInput,
        responses={202: capacity_io.CapacityPlanOutput, 400: BAD_INPUT, 403: NOT_ALLOWED},
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Save a plan and queue its search (202 with its ``id`` and ``status``)."""
        data = capacity_io.CapacityPlanInput(
            data=request.data, context=self.get_serializer_context()
        )
        data.is_valid(raise_exception=True)
        question, project = data.question()
        plan = capacity_plans.capacity_plan_create(
            user=request.user, question=question, project=project
        )
        return plan_accepted(request, plan)

    @extend_schema(
        request=None,
        responses={
            200: capacity_io.CapacityPlanOutput,
            403: NOT_ALLOWED,
            409: OpenApiResponse(description="The plan has finished (succeeded or failed)"),
        },
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Cancel a queued or running plan: its chunks not yet searched are dropped."""
        plan = capacity_plans.capacity_plan_cancel(user=request.user, plan=self.get_object())
        return Response(capacity_io.CapacityPlanOutput(plan).data)


def plan_accepted(request: Request, plan: CapacityPlan) -> Response:
    """202 with the plan, and its address to poll in ``Location``."""
    location = request.build_absolute_uri(reverse("capacity-plan-detail", args=[plan.pk]))
    return Response(
        capacity_io.CapacityPlanOutput(plan).data,
        status=status.HTTP_202_ACCEPTED,
        headers={"Location": location},
    )
