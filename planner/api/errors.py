"""Domain errors to HTTP: the one place the API turns a ``PlannerError`` into a response."""

from __future__ import annotations

from typing import Any

from django.db.models import ProtectedError
from rest_framework import status
from rest_framework.response import Response

from planner.errors import NotAllowed, PlannerError, RunNotRetryable
from planner.services.budgets import SeparationOfDuties, TransitionRefused

NON_FIELD = "non_field_errors"


def planner_error_body(error: PlannerError) -> dict[str, Any]:
    """``{field: [message]}`` like a serializer error (``non_field_errors`` when no field is
    at fault), plus ``detail`` and ``code`` like the pricing API's errors."""
    return {error.field or NON_FIELD: [error.message], "detail": error.message, "code": error.code}


def planner_error_response(error: PlannerError) -> Response:
    """403 for a user who may not act (their role, or separation of duties on a budget
    request they wrote), 409 for a run or request in the wrong state, else 400."""
    if isinstance(error, NotAllowed | SeparationOfDuties):
        return Response(
            {"detail": error.message, "code": error.code}, status=status.HTTP_403_FORBIDDEN
        )
    if isinstance(error, TransitionRefused):
        # Usually someone else acted first: the message says who, and what state it is in.
        return Response(
            {"detail": error.message, "code": error.code}, status=status.HTTP_409_CONFLICT
        )
    if isinstance(error, RunNotRetryable):
        return Response(planner_error_body(error), status=status.HTTP_409_CONFLICT)
    return Response(planner_error_body(error), status=status.HTTP_400_BAD_REQUEST)


def protected_response(error: ProtectedError) -> Response:
    """A delete refused because other records still point at the object."""
    kinds = sorted({str(type(obj)._meta.verbose_name) for obj in error.protected_objects})
    message = f"still used by {', '.join(kinds)}; remove those first"
    return Response({"detail": message, "code": "protected"}, status=status.HTTP_409_CONFLICT)
