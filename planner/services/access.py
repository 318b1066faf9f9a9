"""Who may do what in an organisation: the role checks every planner service makes."""

from __future__ import annotations

from collections.abc import Iterable

from planner.errors import NotAllowed
from planner.lib.actors import Actor
from planner.models import Membership, Organisation, Role

#: Roles that may write projects, scenarios and runs.
AUTHOR_ROLES = (Role.REQUESTER,)


def user_roles(user: Actor, organisation: Organisation) -> set[str]:
    """The roles ``user`` holds in ``organisation`` (superusers hold them all)."""
    if not user.is_authenticated:
        return set()
    if getattr(user, "is_superuser", False):
        return {role.value for role in Role}
    return set(
        Membership.objects.filter(organisation=organisation, user=user).values_list(
            "role", flat=True
        )
    )


def role_assert(
    user: Actor,
    organisation: Organisation,
    roles: Iterable[str],
    *,
    action: str,
) -> None:
    """Raise :class:`NotAllowed` unless ``user`` holds one of ``roles`` in ``organisation``."""
    wanted = set(roles)
    if not user_roles(user, organisation) & wanted:
        names = " or ".join(sorted(Role(role).label.lower() for role in wanted))
        raise NotAllowed(f"Only a {names} of {organisation} may {action}.")
