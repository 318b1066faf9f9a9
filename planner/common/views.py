"""What every planner page shares: refusals, roles."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from lib.actors import Actor
from lib.errors import DomainError
from organisations.models import Organisation, Role
from planner.common.access import user_roles


def forbidden(request: HttpRequest, error: DomainError) -> HttpResponse:
    """The 403 page, saying which role the action needs."""
    return render(request, "planner/forbidden.html", {"message": error.message}, status=403)


def can_author(user: Actor, organisation: Organisation) -> bool:
    """Whether the page offers writing buttons (the services check again on every write)."""
    return Role.REQUESTER in user_roles(user, organisation)
