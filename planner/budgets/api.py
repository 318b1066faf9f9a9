"""REST endpoints of the budgets room: budget requests and their transitions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import django_filters
from django.db.models import Prefetch, QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from planner.budgets import serializers as budget_io
from planner.budgets import services
from planner.budgets.models import AuditEvent, BudgetDecision, BudgetRequest, BudgetState
from planner.budgets.selectors import budget_requests_awaiting, budget_requests_for
from planner.common.api import (
    BAD_INPUT,
    READ_CREATE_AND_PATCH,
    PlannerModelViewSet,
    request_user,
    scoped,
)
from planner.scenarios.models import EstimationRun
from planner.scenarios.selectors import projects_for

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
    filterset_class = BudgetRequestFilter
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
