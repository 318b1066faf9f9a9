"""Writes of organisations and memberships, and the role check every service makes."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils.text import slugify

from lib.actors import Actor
from lib.money import currency_refusal
from organisations.errors import NotAllowed, OrganisationError
from organisations.models import Membership, Organisation, Role
from organisations.selectors import user_roles


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
        raise NotAllowed(f"Only {_indefinite(names)} of {organisation} may {action}.")


def _indefinite(noun: str) -> str:
    """``noun`` with its article: "an approver", "a requester"."""
    return f"{'an' if noun[:1] in 'aeiou' else 'a'} {noun}"


def _currency_check(code: str, *, field: str) -> None:
    refusal = currency_refusal(code)
    if refusal is not None:
        raise OrganisationError(refusal, field=field)


def organisation_create(*, name: str, base_currency: str = "USD") -> Organisation:
    if not name.strip():
        raise OrganisationError("must not be empty", field="name")
    _currency_check(base_currency, field="base_currency")
    slug = slugify(name)[:60] or "organisation"
    try:
        with transaction.atomic():
            return Organisation.objects.create(
                name=name.strip(), slug=slug, base_currency=base_currency
            )
    except IntegrityError as exc:
        raise OrganisationError(f"an organisation named {name!r} exists", field="name") from exc


def role_check(role: str) -> str:
    if role not in Role.values:
        raise OrganisationError(
            f"unknown role {role!r}: one of {', '.join(Role.values)}", field="role"
        )
    return role


def membership_grant(*, organisation: Organisation, user: User, role: str) -> Membership:
    """Give ``user`` the ``role`` in ``organisation`` (idempotent)."""
    membership, _ = Membership.objects.get_or_create(
        organisation=organisation, user=user, role=role_check(role)
    )
    return membership


@dataclass(frozen=True)
class MemberAdded:
    membership: Membership
    organisation_created: bool
    user_created: bool


@transaction.atomic
def member_add(
    *, organisation_name: str, username: str, role: str, password: str | None = None
) -> MemberAdded:
    """Grant ``role`` in the organisation named ``organisation_name`` to ``username``,
    creating either when missing (idempotent). ``password`` sets the user's password."""
    role_check(role)
    if not username.strip():
        raise OrganisationError("must not be empty", field="username")
    organisation = Organisation.objects.filter(name=organisation_name.strip()).first()
    organisation_created = organisation is None
    if organisation is None:
        organisation = organisation_create(name=organisation_name)
    user, user_created = User.objects.get_or_create(username=username.strip())
    if password is not None:
        user.set_password(password)
        user.save(update_fields=["password"])
    elif user_created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    membership = membership_grant(organisation=organisation, user=user, role=role)
    return MemberAdded(membership, organisation_created, user_created)
