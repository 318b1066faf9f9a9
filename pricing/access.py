"""Who sees and who changes which prices: the one rule the pages, the API, the admin and the
planner's price pickers share.

Quotes, on-prem profiles and private price books belong to an organisation: its members see
them, its pricing admins change them. A public price book (no organisation) is seen by
everyone and changed by staff only. Accelerators, providers and exchange rates are shared:
staff and the pricing admins of any organisation change them.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Model, Q, QuerySet

from lib.actors import Actor
from organisations.models import Organisation, Role
from organisations.selectors import organisations_for
from pricing.errors import PricingError, PricingNotAllowed
from pricing.models import OnPremProfile, PriceBook, PriceEntry, VendorQuote

#: Whose prices: a user's (every organisation they belong to) or one organisation's.
Viewer = Actor | Organisation


def is_staff(user: Actor) -> bool:
    return bool(getattr(user, "is_staff", False) or getattr(user, "is_superuser", False))


def _visible_ids(viewer: Viewer) -> Any:
    """The ids of the organisations whose prices ``viewer`` sees, as a subquery (no query
    of its own); None for all of them (a superuser)."""
    if isinstance(viewer, Organisation):
        return [viewer.pk]
    if viewer.is_authenticated and getattr(viewer, "is_superuser", False):
        return None
    return organisations_for(viewer).values("pk")


def visible[M: Model](
    queryset: QuerySet[M], viewer: Viewer, *, field: str, public: bool
) -> QuerySet[M]:
    """``queryset`` narrowed to the rows whose organisation (``field``) ``viewer`` sees;
    ``public`` keeps the rows without one too."""
    ids = _visible_ids(viewer)
    if ids is None:
        return queryset
    seen = Q(**{f"{field}__in": ids})
    if public:
        seen |= Q(**{f"{field}__isnull": True})
    return queryset.filter(seen)


def pricing_admin_organisations(user: Actor) -> QuerySet[Organisation]:
    """The organisations whose prices ``user`` may change."""
    return organisations_for(user, role=Role.PRICING_ADMIN)


def may_edit(user: Actor, organisation_id: int | None) -> bool:
    """Whether ``user`` may change the prices of ``organisation_id`` (None: public ones)."""
    if not user.is_authenticated:
        return False
    if organisation_id is None:
        return is_staff(user)
    return pricing_admin_organisations(user).filter(pk=organisation_id).exists()


def may_edit_shared(user: Actor) -> bool:
    """Whether ``user`` may change shared records: accelerators, providers, rates."""
    return is_staff(user) or pricing_admin_organisations(user).exists()


def may_edit_any(user: Actor) -> bool:
    """Whether ``user`` may change some prices: the pages offer the admin's actions."""
    return may_edit_shared(user)


def record_organisation_id(record: Model) -> int | None:
    """The organisation ``record`` belongs to (None: public); ValueError for a shared
    record (an accelerator, a provider, a rate), which belongs to none."""
    if isinstance(record, PriceEntry):
        return record.book.organisation_id
    if isinstance(record, PriceBook | VendorQuote | OnPremProfile):
        return record.organisation_id
    raise ValueError(f"{type(record).__name__} is shared, not an organisation's")


def may_change(user: Actor, record: Model) -> bool:
    """Whether ``user`` may change or delete ``record``."""
    try:
        organisation_id = record_organisation_id(record)
    except ValueError:
        return may_edit_shared(user)
    return may_edit(user, organisation_id)


def change_assert(user: Actor, record: Model) -> None:
    """Raise :class:`PricingNotAllowed` unless ``user`` may change ``record``."""
    if not may_change(user, record):
        raise PricingNotAllowed(_refusal(record))


def _refusal(record: Model) -> str:
    try:
        organisation_id = record_organisation_id(record)
    except ValueError:
        return "Only pricing admins may change prices, quotes and hardware records."
    if organisation_id is None:
        return "Only staff may change public price books."
    return "Only a pricing admin of its organisation may change this."


UNSET = object()


def write_organisation(
    user: Actor, requested: Organisation | object | None = UNSET, *, public_allowed: bool
) -> Organisation | None:
    """The organisation a new record of ``user`` belongs to.

    ``requested`` is the one the user named (None: public, for a price book); left out, it
    is the one organisation the user is pricing admin of (public for staff who are pricing
    admin nowhere).

    Raises
    ------
    PricingError
        On field ``organisation``, when the user may not write there or must name one.
    """
    if requested is UNSET:
        return _default_organisation(user, public_allowed=public_allowed)
    if requested is None:
        if public_allowed and is_staff(user):
            return None
        what = "staff only may write public price books" if public_allowed else "is required"
        raise PricingError(what, field="organisation")
    assert isinstance(requested, Organisation)
    if not may_edit(user, requested.pk):
        raise PricingError(f"you are not a pricing admin of {requested.name}", field="organisation")
    return requested


def _default_organisation(user: Actor, *, public_allowed: bool) -> Organisation | None:
    mine = list(pricing_admin_organisations(user)[:2])
    if len(mine) == 1:
        return mine[0]
    if not mine and public_allowed and is_staff(user):
        return None
    if not mine:
        raise PricingError("you are a pricing admin of no organisation", field="organisation")
    raise PricingError(
        "is required: you are a pricing admin of several organisations", field="organisation"
    )


def copy_organisation(
    user: Actor, book: PriceBook, requested: Organisation | object | None = UNSET
) -> Organisation | None:
    """The organisation a copy of ``book`` by ``user`` belongs to: the one requested, else
    the book's own (a private book), else as :func:`write_organisation` says (a public one).
    """
    if requested is UNSET and book.organisation_id is not None:
        change_assert(user, book)
        return book.organisation
    return write_organisation(user, requested, public_allowed=True)


def organisation_unchanged(record: PriceBook | VendorQuote | OnPremProfile, values: dict) -> None:
    """Take ``organisation`` out of an update's ``values``; refuse it if it differs: a
    record never moves to another organisation (copy a book instead)."""
    if "organisation" not in values:
        return
    requested = values.pop("organisation")
    if getattr(requested, "pk", None) != record.organisation_id:
        raise PricingError("cannot be changed", field="organisation")
