"""Usage prices of a price book: storage per GB-month and egress per GB.

They follow their book's rules: written only while it is a draft, copied with it
(:func:`pricing.services.books.usage_prices_copy`), deleted with it. The audit trail records
a change of a usage price on its book (the book's trail is where a reader of the book
looks): action ``usage price created``, ``edited`` or ``deleted``, the price named in
``changes``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction
from django.utils import timezone

from lib.actors import OptionalActor
from lib.updates import audit_value, model_update
from pricing.errors import DuplicateRecord, PricingError
from pricing.models import PriceBook, UsagePrice
from pricing.services.audit import price_audit_record
from pricing.services.books import USAGE_FIELDS, price_book_locked_draft

USAGE_TEXT_FIELDS = ("region", "tier", "source")
#: The natural key of a usage price inside its book (also a database constraint).
USAGE_KEY = ("provider", "region", "kind", "tier")


def usage_price_values_check(values: dict[str, Any]) -> dict[str, Any]:
    """Check a usage price's values (texts stripped in place); return them."""
    for name in USAGE_TEXT_FIELDS:
        values[name] = (values.get(name) or "").strip()
    if values.get("provider") is None:
        raise PricingError("provider is required", field="provider")
    if not values["region"]:
        raise PricingError("region is required", field="region")
    if values.get("kind") not in UsagePrice.Kind.values:
        choices = ", ".join(UsagePrice.Kind.values)
        raise PricingError(
            f"unknown kind {values.get('kind')!r}: use one of {choices}", field="kind"
        )
    price = values.get("price")
    if price is None:
        raise PricingError("price is required", field="price")
    if price < 0:
        raise PricingError(f"negative price {price}: must be 0 or more", field="price")
    observed_on = values.get("observed_on")
    if observed_on is not None and observed_on > timezone.localdate():
        raise PricingError(f"is in the future ({observed_on})", field="observed_on")
    return values


def _label(values: Mapping[str, Any]) -> str:
    tier = f" {values['tier']}" if values.get("tier") else ""
    return f"usage price {values['kind']} {values['provider']} {values['region']}{tier}"


def _duplicate_check(book: PriceBook, values: Mapping[str, Any], *, exclude: int | None) -> None:
    same = book.usage_prices.filter(**{name: values[name] for name in USAGE_KEY})
    if exclude is not None:
        same = same.exclude(pk=exclude)
    if same.exists():
        raise DuplicateRecord(
            "the book already has a price of this kind for this provider, region and tier",
            field="price",
        )


@transaction.atomic
def usage_price_create(*, book: PriceBook, user: OptionalActor = None, **values: Any) -> UsagePrice:
    """Add a storage or egress price to a draft book."""
    current = price_book_locked_draft(book)
    values = usage_price_values_check({name: values.get(name) for name in USAGE_FIELDS})
    _duplicate_check(current, values, exclude=None)
    usage = UsagePrice.objects.create(book=current, **values)
    price_audit_record(
        actor=user,
        action="usage price created",
        subject=current,
        changes={_label(values): [None, audit_value(usage.price)]},
        comment=f"added a {usage.unit} price",
    )
    return usage


@transaction.atomic
def usage_price_update(
    *, usage: UsagePrice, user: OptionalActor = None, **changes: Any
) -> UsagePrice:
    current = price_book_locked_draft(usage.book)
    # The stored row, not ``usage``: an admin form has already set its new values on it.
    usage = UsagePrice.objects.select_for_update().get(pk=usage.pk)
    merged = {name: changes.get(name, getattr(usage, name)) for name in USAGE_FIELDS}
    values = usage_price_values_check(merged)
    _duplicate_check(current, values, exclude=usage.pk)
    changed = model_update(usage, values, allowed=USAGE_FIELDS, refuse=PricingError)
    if changed:
        price_audit_record(
            actor=user,
            action="usage price edited",
            subject=current,
            changes={
                f"{_label(values)}: {name}": [audit_value(change.before), audit_value(change.after)]
                for name, change in changed.items()
            },
            comment=f"edited a {usage.unit} price",
        )
    return usage


@transaction.atomic
def usage_price_delete(*, usage: UsagePrice, user: OptionalActor = None) -> None:
    current = price_book_locked_draft(usage.book)
    values = {name: getattr(usage, name) for name in USAGE_FIELDS}
    price_audit_record(
        actor=user,
        action="usage price deleted",
        subject=current,
        changes={_label(values): [audit_value(usage.price), None]},
        comment=f"deleted a {usage.unit} price",
    )
    usage.delete()
