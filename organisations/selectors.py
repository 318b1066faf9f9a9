"""Who belongs where: the reads every role check of both apps makes."""

from __future__ import annotations

from django.db.models import QuerySet

from lib.actors import Actor
from organisations.models import Membership, Organisation, Role


def _is_superuser(user: Actor) -> bool:
    return bool(getattr(user, "is_superuser", False))


def user_roles(user: Actor, organisation: Organisation) -> set[str]:
    """The roles ``user`` holds in ``organisation`` (superusers hold them all)."""
    if not user.is_authenticated:
        return set()
    if _is_superuser(user):
        return {role.value for role in Role}
    return set(
        Membership.objects.filter(organisation=organisation, user=user).values_list(
            "role", flat=True
        )
    )


def user_holds_role(user: Actor, organisation: Organisation, role: str) -> bool:
    return role in user_roles(user, organisation)


def organisations_for(user: Actor, *, role: str | None = None) -> QuerySet[Organisation]:
    """The organisations ``user`` is a member of (holding ``role`` there, if given);
    every organisation for a superuser."""
    if not user.is_authenticated:
        return Organisation.objects.none()
    if _is_superuser(user):
        return Organisation.objects.all()
    memberships = Membership.objects.filter(user__pk=user.pk)
    if role is not None:
        memberships = memberships.filter(role=role)
    return Organisation.objects.filter(pk__in=memberships.values("organisation_id"))


def organisation_ids_for(user: Actor, *, role: str | None = None) -> set[int] | None:
    """The ids of :func:`organisations_for`; None for a superuser, who sees them all."""
    if user.is_authenticated and _is_superuser(user):
        return None
    return set(organisations_for(user, role=role).values_list("pk", flat=True))
