"""What every room's API shares: who reaches the endpoints, the service viewset.

Who reaches the planner endpoints at all; what each member may do is the services' call.

Two layers keep an organisation's data to itself:

* every queryset comes from a room's selectors, scoped to the organisations the user
  belongs to, so another organisation's object is a 404, never a 403;
* every write calls a service, which checks the user's role there (``role_assert``) and
  raises :class:`planner.common.errors.NotAllowed`, a 403 (see :mod:`lib.api`).

The permission below only turns away anonymous requests; it deliberately repeats none of
the role rules, so they live in one place.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from drf_spectacular.utils import OpenApiResponse
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView

from lib.api import ServiceModelViewSet
from planner.common.parsers import PLANNER_PARSERS


class SignedIn(BasePermission):
    """A signed-in user (session or token); 401/403 for anonymous requests."""

    message = "Sign in, or send an API token, to use the planner API."

    def has_permission(self, request: Request, view: APIView) -> bool:
        return bool(request.user and request.user.is_authenticated)


class PlannerModelViewSet(ServiceModelViewSet):
    """The shared service viewset with planner scoping.

    Reads come from each room's selectors (``get_queryset`` of each viewset); writes parse
    the input serializer, with the request in its context so ids resolve only among the
    user's objects, and call one service. Domain errors become responses in
    :func:`lib.api.exception_handler`, for every API view alike.
    """

    permission_classes = [SignedIn]
    parser_classes = PLANNER_PARSERS


# What the rooms' viewsets allow and answer, in their schemas alike.
READ_AND_CREATE = ["get", "post", "head", "options"]
READ_CREATE_AND_PATCH = [*READ_AND_CREATE, "patch"]
BAD_INPUT = OpenApiResponse(description="A field is missing, malformed or refused; it is named")
NOT_ALLOWED = OpenApiResponse(description="The user's role in the organisation does not allow it")


def request_user(request: HttpRequest | None) -> Any:
    """Who sent ``request``; anonymous without one (as when the schema is generated)."""
    return request.user if request is not None else AnonymousUser()


def scoped[M: Model](
    selector: Callable[[Any], QuerySet[M]],
) -> Callable[[HttpRequest | None], QuerySet[M]]:
    """A filter's id choices: the rows ``selector`` gives the request's user, so an id the
    user cannot see is refused like one that does not exist (400 naming the filter)."""

    def choices(request: HttpRequest | None) -> QuerySet[M]:
        return selector(request_user(request))

    return choices
