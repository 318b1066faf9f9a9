"""Domain errors to HTTP: the one place the API turns a ``PricingError`` into a response."""

from __future__ import annotations

from typing import Any

from rest_framework import status
from rest_framework.response import Response

from pricing.errors import CsvImportError, DuplicateRecord, PricingError, PublishedBookImmutable

CONFLICTS = (PublishedBookImmutable, DuplicateRecord)


def pricing_error_body(error: PricingError) -> dict[str, Any]:
    """``{"detail", "code"}``, plus ``{field: [message]}`` like a serializer error."""
    body: dict[str, Any] = {"detail": error.message, "code": error.code}
    if error.field:
        body[error.field] = [error.message]
    if isinstance(error, CsvImportError):
        body["errors"] = [
            {"line": e.line, "column": e.column, "reason": e.reason} for e in error.errors
        ]
    return body


def pricing_error_response(error: PricingError) -> Response:
    """409 when the state of a record refuses the change, 400 for bad input."""
    code = status.HTTP_409_CONFLICT if isinstance(error, CONFLICTS) else status.HTTP_400_BAD_REQUEST
    return Response(pricing_error_body(error), status=code)
