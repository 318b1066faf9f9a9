"""A model viewset whose writes call services: parse the input, call one service, render."""

from __future__ import annotations

from typing import Any, ClassVar

from rest_framework import serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from pricing.api.errors import pricing_error_response
from pricing.api.permissions import PricingAdminWrites
from pricing.api.schema import InputOutputSchema
from pricing.errors import PricingError


class PricingErrorsMixin:
    """Turn domain errors raised by services into 400/409 responses."""

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, PricingError):
            return pricing_error_response(exc)
        return super().handle_exception(exc)  # type: ignore[misc]


class ServiceModelViewSet(PricingErrorsMixin, viewsets.ModelViewSet):
    """Reads use ``output_serializer_class``; writes parse with ``input_serializer_class``
    (``update_input_serializer_class`` for updates, if set) and call the service hooks."""

    permission_classes = [PricingAdminWrites]
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
        serializer = self.get_input_serializer_class()(data=request.data, partial=partial)
        serializer.is_valid(raise_exception=True)
        return dict(serializer.validated_data)

    def output(self, instance: Any, code: int = status.HTTP_200_OK) -> Response:
        return Response(self.output_serializer_class(instance).data, status=code)

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
