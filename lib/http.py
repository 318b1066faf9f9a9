"""Failures answered the way the caller speaks: JSON ``{"detail", "code"}`` under ``/api/``,
pages elsewhere, and 503 rather than 500 while the database cannot be reached.

The root urlconf names the ``handler*`` functions here. Django calls them for errors no view
turned into a response (an unknown URL, a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE``, an
exception), so API clients never get an HTML error page. They work without the database, the
session or the user: they are what answers when those are down.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template import loader
from django.views import defaults

logger = logging.getLogger(__name__)

API_PREFIX = "/api/"
# The answers the API's exception handler (lib.api) gives too.
DATABASE_UNAVAILABLE = {"detail": "database unavailable", "code": "database_unavailable"}
TOO_LARGE = {"detail": "Request body too large.", "code": "payload_too_large"}
RETRY_SOON = {"Retry-After": "5"}  # the outage is not the request's fault: try again
# Losing the connection is an outage worth retrying; other database errors are bugs (500).
OUTAGE_ERRORS = (OperationalError, InterfaceError)


def is_api_request(request: HttpRequest) -> bool:
    return request.path.startswith(API_PREFIX)


def error_json(status: int, detail: str, code: str) -> JsonResponse:
    return JsonResponse({"detail": detail, "code": code}, status=status)


def is_database_outage(error: BaseException | None) -> bool:
    """Whether ``error``, or an exception it was raised from, means the database is down."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, OUTAGE_ERRORS):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False


def service_unavailable(request: HttpRequest) -> HttpResponse:
    """503 for a database outage: JSON under ``/api/``, a page (no session, no user) elsewhere."""
    if is_api_request(request):
        return JsonResponse(DATABASE_UNAVAILABLE, status=503, headers=RETRY_SOON)
    return HttpResponse(loader.render_to_string("503.html"), status=503, headers=RETRY_SOON)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """``handler400``: a body over the size limit is 413; other bad requests are 400."""
    if isinstance(exception, RequestDataTooBig):
        return payload_too_large(request)
    if is_api_request(request):
        return error_json(400, "Bad request.", "bad_request")
    return defaults.bad_request(request, exception)


def payload_too_large(request: HttpRequest) -> HttpResponse:
    if is_api_request(request):
        return JsonResponse(TOO_LARGE, status=413)
    return HttpResponse(TOO_LARGE["detail"], status=413, content_type="text/plain; charset=utf-8")


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api_request(request):
        return error_json(403, "You do not have permission to perform this action.", "forbidden")
    return defaults.permission_denied(request, exception)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api_request(request):
        return error_json(404, "Not found.", "not_found")
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    """``handler500``: 503 while the database is unreachable, else 500 (JSON under ``/api/``).

    Django calls it while handling the exception, so ``sys.exc_info()`` names it.
    """
    if is_database_outage(sys.exc_info()[1]):
        return service_unavailable(request)
    if is_api_request(request):
        return error_json(500, "Server error.", "server_error")
    return defaults.server_error(request)


class DatabaseOutageMiddleware:
    """Answers 503 for a database outage a view raised, also while ``DEBUG`` would show a
    traceback page (``handler500`` then is not called). Errors outside views, such as saving
    the session, still reach ``handler500``."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not is_database_outage(exception):
            return None
        logger.error("Database unavailable", exc_info=exception)
        return service_unavailable(request)
