"""The REST API's shared parts: the one exception handler for both apps' domain errors, and
the service viewset both apps' viewsets derive from (parse the input, call one service,
render the output).

Settings name :func:`exception_handler` in ``REST_FRAMEWORK["EXCEPTION_HANDLER"]``, so every
API view, viewset or not, answers a refused operation alike.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.db.models import ProtectedError
from drf_spectacular.openapi import AutoSchema
from rest_framework import serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from planner.lib.errors import DomainError

NON_FIELD = "non_field_errors"
KIND_STATUS = {
    "invalid": status.HTTP_400_BAD_REQUEST,
    "forbidden": status.HTTP_403_FORBIDDEN,
    "conflict": status.HTTP_409_CONFLICT,
}


def domain_error_body(error: DomainError) -> dict[str, Any]:
    """``{"detail", "code"}`` and, like a serializer error, ``{field: [message]}`` for the
    field at fault (``non_field_errors`` for invalid input that names none)."""
    body: dict[str, Any] = {"detail": error.message, "code": error.code, **error.details()}
    if error.field:
        body[error.field] = [error.message]
    elif error.kind == "invalid":
        body[NON_FIELD] = [error.message]
    return body


def domain_error_response(error: DomainError) -> Response:
    """400, 403 or 409 by the error's kind, with :func:`domain_error_body`."""
    return Response(domain_error_body(error), status=KIND_STATUS[error.kind])


def protected_response(error: ProtectedError) -> Response:
    """A delete refused because other records still point at the object."""
    kinds = sorted({str(type(obj)._meta.verbose_name) for obj in error.protected_objects})
    message = f"still used by {', '.join(kinds)}; remove those first"
    return Response({"detail": message, "code": "protected"}, status=status.HTTP_409_CONFLICT)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, with domain errors and protected deletes answered as above."""
    if isinstance(exc, DomainError):
        return domain_error_response(exc)
    if isinstance(exc, ProtectedError):
        return protected_response(exc)
    return drf_exception_handler(exc, context)


class InputOutputSchema(AutoSchema):
    """Documents a view's input serializer as the request and its output serializer as the
    response (the auto schema would use one serializer for both)."""

    def get_request_serializer(self) -> Any:
        get_input = getattr(self.view, "get_input_serializer_class", None)
        if get_input is not None and self.method in ("POST", "PUT", "PATCH"):
            return get_input()
        return super().get_request_serializer()

    def get_response_serializers(self) -> Any:
        output = getattr(self.view, "output_serializer_class", None)
        return output or super().get_response_serializers()


class ServiceModelViewSet(viewsets.ModelViewSet):
    """Reads use ``output_serializer_class``; writes parse with ``input_serializer_class``
    (``update_input_serializer_class`` for updates, if set) and call the service hooks.

    Each app's base sets ``permission_classes``; the serializers get the viewset's context
    (the request), so an input serializer can resolve ids among the user's own objects.
    """

    schema = InputOutputSchema()
    input_serializer_class: ClassVar[type[serializers.Serializer]]
    update_input_serializer_class: ClassVar[type[serializers.Serializer] | None] = None
    output_serializer_class: ClassVar[type[serializers.Serializer]]

    def get_serializer_class(self) -> type[serializers.BaseSerializer]:
        return self.output_serializer_class

    def get_input_serializer_class(self) -> type[serializers.Serializer]:
        if self.action in ("update", "partial_update") and self.update_input_serializer_class:
            return self.update_input_serializer_class
        return self.input_serializer_class

    def parsed(self, request: Request, *, partial: bool = False) -> dict[str, Any]:
        serializer = self.get_input_serializer_class()(
            data=request.data, partial=partial, context=self.get_serializer_context()
        )
        serializer.is_valid(raise_exception=True)
        return dict(serializer.validated_data)

    def output(self, instance: Any, code: int = status.HTTP_200_OK) -> Response:
        data = self.output_serializer_class(instance, context=self.get_serializer_context()).data
        return Response(data, status=code)

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        instance = self.service_create(self.parsed(request))
        return self.output(instance, status.HTTP_201_CREATED)

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        instance = self.get_object()
        changed = self.service_update(
            instance, self.parsed(request, partial=kwargs.get("partial", False))
        )
        return self.output(changed)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        self.service_delete(self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    def service_create(self, data: dict[str, Any]) -> Any:
        raise NotImplementedError

    def service_update(self, instance: Any, data: dict[str, Any]) -> Any:
        raise NotImplementedError

    def service_delete(self, instance: Any) -> None:
        raise NotImplementedError
