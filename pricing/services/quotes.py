"""Vendor quotes: offers with validity dates. An expired quote cannot be chosen."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from django.db import transaction

from lib.actors import OptionalActor, actor_user
from lib.updates import model_update
from organisations.models import Organisation
from pricing.currency import currency_code_check
from pricing.errors import PricingError, QuoteNotSelectable
from pricing.models import VendorQuote
from pricing.services._common import positive_check
from pricing.services.audit import price_audit_fields, price_audit_record

HOURS_PER_MONTH = Decimal(730)  # 8,760 hours a year / 12
PRICE_QUANTUM = Decimal("1e-10")
QUOTE_FIELDS = (
    "vendor",
    "reference",
    "provider",
    "accelerator",
    "accelerator_count",
    "price_basis",
    "price_per_accelerator_hour",
    "total_price",
    "term_months",
    "currency",
    "valid_from",
    "valid_until",
    "terms",
    "is_example",
)


def quote_price_per_hour_derive(
    *, total_price: Decimal, accelerator_count: int, term_months: int
) -> Decimal:
    """Price of one accelerator-hour from a total for a term.

    ``total / (count x term_months x 730 h)``, 730 h being an average month (8,760 h / 12).
    [currency/h]
    """
    hours = Decimal(accelerator_count) * Decimal(term_months) * HOURS_PER_MONTH
    return (total_price / hours).quantize(PRICE_QUANTUM, rounding=ROUND_HALF_EVEN)


def quote_values_check(values: dict[str, Any]) -> dict[str, Any]:
    """Check a quote's values, set its price basis and derive its hourly price; return them."""
    for name in ("vendor", "reference", "terms"):
        values[name] = (values.get(name) or "").strip()
    if not values["vendor"]:
        raise PricingError("vendor is required", field="vendor")
    if values.get("accelerator") is None:
        raise PricingError("accelerator is required", field="accelerator")
    positive_check(values.get("accelerator_count"), field="accelerator_count", what="count")
    if values["accelerator_count"] > MOST_ACCELERATORS:
        raise PricingError(
            f"must be at most {MOST_ACCELERATORS:,}, got {values['accelerator_count']:,}",
            field="accelerator_count",
        )
    currency_code_check(values.get("currency") or "")
    _quote_dates_check(values.get("valid_from"), values.get("valid_until"))
    _term_check(values.get("term_months"))
    _quote_price_check(values)
    values["is_example"] = bool(values.get("is_example"))
    return values


#: The most accelerators a quote may cover: ten times the largest clusters announced.
MOST_ACCELERATORS = 1_000_000
#: The longest term a quote may commit to: far beyond any real contract, and well inside the
#: column (a positive small integer). [months]
LONGEST_TERM_MONTHS = 600


def _term_check(term_months: int | None) -> None:
    if term_months is None:
        return
    if not 1 <= term_months <= LONGEST_TERM_MONTHS:
        raise PricingError(
            f"must be between 1 and {LONGEST_TERM_MONTHS} months, got {term_months}",
            field="term_months",
        )


def _quote_dates_check(valid_from: date | None, valid_until: date | None) -> None:
    if valid_from is None:
        raise PricingError("valid_from is required", field="valid_from")
    if valid_until is None:
        raise PricingError("valid_until is required", field="valid_until")
    if valid_until < valid_from:
        raise PricingError(f"{valid_until} is before valid_from {valid_from}", field="valid_until")


def _quote_price_check(values: dict[str, Any]) -> None:
    total = values.get("total_price")
    if total is None:
        values["price_basis"] = VendorQuote.PriceBasis.HOURLY
        values["term_months"] = values.get("term_months")
        positive_check(
            values.get("price_per_accelerator_hour"),
            field="price_per_accelerator_hour",
            what="price",
        )
        return
    positive_check(total, field="total_price", what="total price")
    positive_check(values.get("term_months"), field="term_months", what="term")
    derived = quote_price_per_hour_derive(
        total_price=total,
        accelerator_count=values["accelerator_count"],
        term_months=values["term_months"],
    )
    given = values.get("price_per_accelerator_hour")
    if given is not None and abs(given - derived) > Decimal("0.000001"):
        raise PricingError(
            f"{given} disagrees with the total for the term, which gives {derived}",
            field="price_per_accelerator_hour",
        )
    values["price_basis"] = VendorQuote.PriceBasis.TERM_TOTAL
    values["price_per_accelerator_hour"] = derived


def quote_create(*, user: OptionalActor, organisation: Organisation, **values: Any) -> VendorQuote:
    """Record a vendor quote of ``organisation`` priced per accelerator-hour, or as a total
    for a term."""
    checked = quote_values_check({name: values.get(name) for name in QUOTE_FIELDS})
    quote = VendorQuote.objects.create(
        **checked, organisation=organisation, created_by=actor_user(user)
    )
    price_audit_record(
        actor=user, action="created", subject=quote, changes=price_audit_fields(quote, QUOTE_FIELDS)
    )
    return quote


@transaction.atomic
def quote_update(*, quote: VendorQuote, user: OptionalActor = None, **changes: Any) -> VendorQuote:
    quote = VendorQuote.objects.select_for_update().get(pk=quote.pk)  # the stored row
    merged = {name: changes.get(name, getattr(quote, name)) for name in QUOTE_FIELDS}
    if "price_per_accelerator_hour" in changes and "total_price" not in changes:
        merged["total_price"] = None  # a new hourly price replaces a total for a term
    elif merged["total_price"] is not None and "price_per_accelerator_hour" not in changes:
        merged["price_per_accelerator_hour"] = None  # derived again from the total
    checked = quote_values_check(merged)
    changed = model_update(quote, checked, allowed=QUOTE_FIELDS, refuse=PricingError)
    if changed:
        price_audit_record(actor=user, action="edited", subject=quote, changes=changed)
    return quote


def quote_expire(*, quote: VendorQuote, on: date, user: OptionalActor = None) -> VendorQuote:
    """End ``quote``'s validity the day before ``on``: from ``on`` it is expired, cannot be
    chosen for a new budget, and budgets on it are warned. A quote not yet valid by then
    keeps one day of validity, the day before ``on`` (its dates stay ordered)."""
    last = on - timedelta(days=1)
    if quote.valid_until <= last:
        return quote  # already expired on ``on``
    return quote_update(
        quote=quote, user=user, valid_until=last, valid_from=min(quote.valid_from, last)
    )


@transaction.atomic
def quote_delete(*, quote: VendorQuote, user: OptionalActor = None) -> None:
    price_audit_record(
        actor=user, action="deleted", subject=quote, changes=price_audit_fields(quote, QUOTE_FIELDS)
    )
    quote.delete()


def quote_assert_selectable(quote: VendorQuote, *, on: date) -> None:
    """Refuse a quote that is not valid on ``on`` (the planner calls this for new budgets)."""
    validity = quote.validity_on(on)
    if validity == "expired":
        raise QuoteNotSelectable(
            f"Quote from {quote.vendor} expired on {quote.valid_until}; it cannot be chosen "
            f"for a budget on {on}.",
            field="quote",
        )
    if validity == "not_yet_valid":
        raise QuoteNotSelectable(
            f"Quote from {quote.vendor} is valid only from {quote.valid_from}; it cannot be "
            f"chosen for a budget on {on}.",
            field="quote",
        )
