from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema


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
