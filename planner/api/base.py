"""The planner's service viewset: the pricing API's pattern, with planner errors and scoping.

Reads come from :mod:`planner.selectors` (``get_queryset`` of each viewset); writes parse
the input serializer, with the request in its context so ids resolve only among the user's
objects, and call one service.
"""

from __future__ import annotations

from typing import Any

from django.db.models import ProtectedError
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from planner.api.errors import planner_error_response, protected_response
from planner.api.parsers import PLANNER_PARSERS
from planner.api.permissions import SignedIn
from planner.errors import PlannerError
from pricing.api.base import ServiceModelViewSet
from pricing.api.schema import InputOutputSchema


class PlannerErrorsMixin:
    """Turn domain errors raised by services into 400/403/409 responses."""

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, PlannerError):
            return planner_error_response(exc)
        if isinstance(exc, ProtectedError):
            return protected_response(exc)
        return super().handle_exception(exc)  # type: ignore[misc]


class PlannerModelViewSet(PlannerErrorsMixin, ServiceModelViewSet):
    permission_classes = [SignedIn]
    parser_classes = PLANNER_PARSERS
    schema = InputOutputSchema()

    def parsed(self, request: Request, *, partial: bool = False) -> dict[str, Any]:
        serializer = self.get_input_serializer_class()(
            data=request.data, partial=partial, context=self.get_serializer_context()
        )
        serializer.is_valid(raise_exception=True)
        return dict(serializer.validated_data)

    def output(self, instance: Any, code: int = status.HTTP_200_OK) -> Response:
        data = self.output_serializer_class(instance, context=self.get_serializer_context()).data
        return Response(data, status=code)
