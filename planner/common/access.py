"""Who may do what in an organisation: the role checks every planner service makes.

The checks themselves live in :mod:`organisations`, which the pricing app uses too.
"""

from __future__ import annotations

from collections.abc import Iterable

from lib.actors import Actor
from organisations import errors as organisation_errors
from organisations import services as organisation_services
from organisations.models import Organisation, Role
from organisations.selectors import user_roles
from planner.common.errors import NotAllowed

#: Roles that may write projects, scenarios and runs.
AUTHOR_ROLES = (Role.REQUESTER,)

__all__ = ["AUTHOR_ROLES", "role_assert", "user_roles"]


def role_assert(
    user: Actor, organisation: Organisation, roles: Iterable[str], *, action: str
) -> None:
    """Raise the planner's :class:`NotAllowed` unless ``user`` holds one of ``roles`` in
    ``organisation`` (the organisations app's check, refused as a planner error)."""
    try:
        organisation_services.role_assert(user, organisation, roles, action=action)
    except organisation_errors.NotAllowed as refusal:
        raise NotAllowed(refusal.message) from refusal
