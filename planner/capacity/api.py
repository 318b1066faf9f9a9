"""REST endpoints of the capacity room: capacity plans, saved and searched on the workers."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from planner.capacity import serializers as capacity_io
from planner.capacity import services as capacity_plans
from planner.capacity.models import CapacityPlan
from planner.capacity.selectors import capacity_plans_for
from planner.common.api import (
    BAD_INPUT,
    NOT_ALLOWED,
    SignedIn,
)
from planner.common.parsers import PLANNER_PARSERS


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
        return capacity_plans_for(self.request.user)

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
