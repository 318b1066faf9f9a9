"""The REST API's shared parts: the one exception handler for both apps' domain errors, the
service viewset both apps' viewsets derive from (parse the input, call one service, render
the output), and the OpenAPI schema: its error responses and the view serving it.

Settings name :func:`exception_handler` in ``REST_FRAMEWORK["EXCEPTION_HANDLER"]``, so every
API view, viewset or not, answers a refused operation alike, and
:func:`error_responses_hook` in ``SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"]``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from typing import Any, ClassVar

from django.core.exceptions import RequestDataTooBig
from django.core.signals import setting_changed
from django.db import DataError, IntegrityError, transaction
from django.db.models import ProtectedError
from django.dispatch import receiver
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView
from rest_framework import serializers, status, viewsets
from rest_framework.exceptions import APIException
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from lib.errors import DomainError
from lib.http import DATABASE_UNAVAILABLE, RETRY_SOON, TOO_LARGE, is_database_outage

logger = logging.getLogger(__name__)

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


#: The answer to a write that ran into a concurrent change the services did not foresee.
CONCURRENT_CHANGE = {
    "detail": "conflicts with a change made at the same time: reload and try again",
    "code": "conflict",
}


def protected_response(error: ProtectedError) -> Response:
    """A delete refused because other records still point at the object."""
    kinds = sorted({str(type(obj)._meta.verbose_name) for obj in error.protected_objects})
    message = f"still used by {', '.join(kinds)}; remove those first"
    return Response({"detail": message, "code": "protected"}, status=status.HTTP_409_CONFLICT)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, with domain errors and protected deletes answered as above, a body over
    the size limit 413, a database outage 503, and DRF's own ``{"detail"}`` given its code."""
    if isinstance(exc, DomainError):
        return domain_error_response(exc)
    if isinstance(exc, ProtectedError):
        return protected_response(exc)
    if isinstance(exc, RequestDataTooBig):
        return Response(dict(TOO_LARGE), status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    if isinstance(exc, DataError):
        # A value the column cannot hold (a number out of its range) that no check caught:
        # nothing was written; the request is at fault, not the server.
        logger.error("Value out of its column's range answered as bad input", exc_info=exc)
        return Response(
            {"detail": "a value is out of the range its field can store", "code": "out_of_range"},
            status=status.HTTP_400_BAD_REQUEST,
        )
    if isinstance(exc, IntegrityError):
        # A constraint the services did not foresee, usually a concurrent change (a row
        # deleted while another request pointed at it): nothing was written.
        logger.error("Integrity error answered as a conflict", exc_info=exc)
        return Response(dict(CONCURRENT_CHANGE), status=status.HTTP_409_CONFLICT)
    if is_database_outage(exc):
        logger.error("Database unavailable", exc_info=exc)
        return Response(
            dict(DATABASE_UNAVAILABLE),
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers=RETRY_SOON,
        )
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(exc, APIException) and _detail_only(response.data):
        response.data["code"] = exc.get_codes()
    return response


def _detail_only(data: object) -> bool:
    return isinstance(data, dict) and set(data) == {"detail"}


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
        return Response(data, status=code, headers={"ETag": etag_of(data)})

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return self.output(self.get_object())

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        instance = self.service_create(self.parsed(request))
        return self.output(instance, status.HTTP_201_CREATED)

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        with transaction.atomic():
            instance = self._current(request)
            changed = self.service_update(
                instance, self.parsed(request, partial=kwargs.get("partial", False))
            )
        return self.output(changed)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        with transaction.atomic():
            self.service_delete(self._current(request))
        return Response(status=status.HTTP_204_NO_CONTENT)

    def _current(self, request: Request) -> Any:
        """The object, its row locked until the write commits, checked against the request's
        ``If-Match`` (optimistic concurrency): a write based on a representation someone
        else has changed since is refused with 412, not applied over their change."""
        instance = self.get_object()
        locked = type(instance)._default_manager.select_for_update().get(pk=instance.pk)
        wanted = request.headers.get("If-Match")
        if wanted is not None:
            current = etag_of(
                self.output_serializer_class(locked, context=self.get_serializer_context()).data
            )
            if not etag_matches(wanted, current):
                raise PreconditionFailed(current)
        return locked

    def service_create(self, data: dict[str, Any]) -> Any:
        raise NotImplementedError

    def service_update(self, instance: Any, data: dict[str, Any]) -> Any:
        raise NotImplementedError

    def service_delete(self, instance: Any) -> None:
        raise NotImplementedError


# --- Optimistic concurrency ------------------------------------------------------------


def etag_of(data: Any) -> str:
    """A strong ETag of an object's API representation: any change to what a reader sees
    changes it."""
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return f'"{hashlib.sha256(canonical.encode()).hexdigest()[:32]}"'


def etag_matches(if_match: str, current: str) -> bool:
    """Whether an ``If-Match`` header (a list of ETags, or ``*``) names ``current``; weak
    ETags never match (RFC 9110, 13.1.1: If-Match compares strongly)."""
    tags = [tag.strip() for tag in if_match.split(",")]
    return "*" in tags or current in tags


class PreconditionFailed(APIException):
    """412: the object changed since the ETag the write was based on."""

    status_code = status.HTTP_412_PRECONDITION_FAILED
    default_code = "precondition_failed"

    def __init__(self, current: str) -> None:
        super().__init__(
            "It was changed since you read it (If-Match does not name its current ETag "
            f"{current}): GET it again, re-apply your change and send it with the new ETag.",
            "precondition_failed",
        )


# --- The OpenAPI schema -----------------------------------------------------------------

ERROR_SCHEMA = {
    "type": "object",
    "description": "A refused request: what went wrong and a stable code for programs.",
    "properties": {"detail": {"type": "string"}, "code": {"type": "string"}},
    "required": ["detail"],
}
INVALID_SCHEMA = {
    "type": "object",
    "description": (
        "Invalid input: ``{field: [message]}`` per field at fault (``non_field_errors`` for "
        "the whole input), with ``detail`` and ``code`` when a rule refused it."
    ),
    "properties": {"detail": {"type": "string"}, "code": {"type": "string"}},
    "additionalProperties": True,
}
BODY_METHODS = frozenset({"post", "put", "patch"})
WRITE_METHODS = BODY_METHODS | {"delete"}
# Status, description and which operations can answer it; every API path can answer these.
ERROR_RESPONSES: tuple[tuple[str, str, frozenset[str] | None], ...] = (
    ("400", "Invalid input or query parameters.", None),
    ("401", "No or invalid credentials (send `Authorization: Token <token>`).", None),
    ("403", "Authenticated, but not allowed to do this.", None),
    ("404", "No such object (or not visible to you), or no such page.", None),
    ("409", "Refused by the object's current state.", WRITE_METHODS),
    (
        "412",
        "`If-Match` does not name the object's current `ETag`: it changed since you read it "
        "(optimistic concurrency; send no `If-Match` to write regardless).",
        frozenset({"put", "patch", "delete"}),
    ),
    ("413", "Request body too large.", BODY_METHODS),
    (
        "414",
        "Request line too long (gunicorn refuses lines over 4,094 bytes): send fewer or "
        "shorter query parameters. The web server answers it, as HTML.",
        None,
    ),
    ("429", "Too many requests; try again later.", None),
    (
        "431",
        "Request headers too large or too many (gunicorn: over 8,190 bytes in one header or "
        "over 100 headers). The web server answers it, as HTML.",
        None,
    ),
    ("503", "A service TrainPlan needs (the database) is unavailable; try again later.", None),
)


def error_responses_hook(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: document every operation's error answers.

    Responses a view documents itself (``@extend_schema(responses=...)``) are kept.
    """
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault("Error", ERROR_SCHEMA)
    schemas.setdefault("InvalidInput", INVALID_SCHEMA)
    for operations in result.get("paths", {}).values():
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            for code, description, methods in ERROR_RESPONSES:
                if methods is None or method in methods:
                    responses.setdefault(code, error_response(code, description))
    return result


#: Answered by the web server before the request reaches Django: no JSON body.
SERVER_ANSWERS = frozenset({"414", "431"})


def error_response(code: str, description: str) -> dict[str, Any]:
    if code in SERVER_ANSWERS:
        return {"description": description}
    name = "InvalidInput" if code == "400" else "Error"
    schema = {"$ref": f"#/components/schemas/{name}"}
    return {"description": description, "content": {"application/json": {"schema": schema}}}


class SchemaView(SpectacularAPIView):
    """The OpenAPI schema, generated once and then served from memory.

    Generation takes about a second and is not thread-safe (drf-spectacular's inspectors keep
    the view they look at on shared instances), so concurrent first requests wait on a lock
    instead of generating side by side. The schema is public and the same for every caller.
    """

    _lock = threading.Lock()
    _schemas: ClassVar[dict[str | None, dict[str, Any]]] = {}

    @extend_schema(exclude=True)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        # No ?version= or ?lang=: one cached schema per caller-chosen value would let anyone
        # fill memory (and hold the lock) by asking for new ones.
        version = self.api_version or request.version
        filename = self._get_filename(request, version)
        headers = {"Content-Disposition": f'inline; filename="{filename}"'}
        return Response(data=self.schema_for(request, version), headers=headers)

    def schema_for(self, request: Request, version: str | None) -> dict[str, Any]:
        with self._lock:
            if version not in self._schemas:
                generator = self.generator_class(
                    urlconf=self.urlconf, api_version=version, patterns=self.patterns
                )
                self._schemas[version] = generator.get_schema(
                    request=request, public=self.serve_public
                )
            return self._schemas[version]

    @classmethod
    def clear(cls) -> None:
        with cls._lock:
            cls._schemas.clear()


@receiver(setting_changed)
def _schema_settings_changed(*, setting: str, **kwargs: Any) -> None:
    # Tests that override the API's settings or urls must not see a schema built before.
    if setting in {"REST_FRAMEWORK", "SPECTACULAR_SETTINGS", "ROOT_URLCONF"}:
        SchemaView.clear()
