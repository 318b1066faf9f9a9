"""Reads of the pricing app: lists for pages and the API, conversions, price ranges."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal

from django.db.models import Count, Q, QuerySet

from pricing.access import Viewer, visible
from pricing.currency import ConvertedAmount, currency_code_check
from pricing.errors import NoExchangeRate
from pricing.models import (
    Accelerator,
    ExchangeRate,
    OnPremProfile,
    PriceBook,
    PriceEntry,
    Provider,
    VendorQuote,
)
from pricing.services.onprem import onprem_inputs_from
from pricing.tco import OnPremCost, onprem_cost

AMOUNT_QUANTUM = Decimal("1e-10")


def accelerator_list() -> QuerySet[Accelerator]:
    return Accelerator.objects.all()


def provider_list() -> QuerySet[Provider]:
    return Provider.objects.all()


def price_book_list(*, viewer: Viewer) -> QuerySet[PriceBook]:
    """Public books and the private books of the organisations ``viewer`` sees."""
    books = PriceBook.objects.select_related("copied_from", "organisation")
    books = visible(books, viewer, field="organisation", public=True)
    books = books.annotate(entry_count=Count("entries"))
    return books.order_by("-fetched_at", "-id")  # aggregation drops the default ordering


def price_entry_list(*, viewer: Viewer) -> QuerySet[PriceEntry]:
    entries = PriceEntry.objects.select_related("book", "provider", "accelerator")
    return visible(entries, viewer, field="book__organisation", public=True)


def price_entries_published(
    *, viewer: Viewer, accelerator: Accelerator | None = None
) -> QuerySet[PriceEntry]:
    entries = price_entry_list(viewer=viewer).filter(book__status=PriceBook.Status.PUBLISHED)
    return entries if accelerator is None else entries.filter(accelerator=accelerator)


def quote_list(*, viewer: Viewer) -> QuerySet[VendorQuote]:
    """The quotes of the organisations ``viewer`` sees (a user's: those they belong to)."""
    quotes = VendorQuote.objects.select_related("accelerator", "provider", "organisation")
    return visible(quotes, viewer, field="organisation", public=False)


def quotes_selectable(*, on: date, quotes: QuerySet[VendorQuote]) -> QuerySet[VendorQuote]:
    """Of ``quotes``, those that can be chosen for a budget made on ``on``: neither expired
    nor early."""
    return quotes.filter(valid_from__lte=on, valid_until__gte=on)


def onprem_profile_list(*, viewer: Viewer) -> QuerySet[OnPremProfile]:
    profiles = OnPremProfile.objects.select_related("accelerator", "organisation")
    return visible(profiles, viewer, field="organisation", public=False)


def onprem_profile_cost(*, profile: OnPremProfile) -> OnPremCost:
    return onprem_cost(onprem_inputs_from(profile))


def exchange_rate_list() -> QuerySet[ExchangeRate]:
    return ExchangeRate.objects.all()


def _latest_rate(base_currency: str, quote_currency: str, on: date) -> ExchangeRate | None:
    return (
        ExchangeRate.objects.filter(
            base_currency=base_currency, quote_currency=quote_currency, rate_date__lte=on
        )
        .order_by("-rate_date")
        .first()
    )


def money_convert(
    *, amount: Decimal, from_currency: str, to_currency: str, on: date
) -> ConvertedAmount:
    """Convert ``amount`` at the latest rate dated on or before ``on``.

    Uses the direct rate, or the inverse of the opposite rate when it is more recent.

    Raises
    ------
    NoExchangeRate
        When neither rate exists on or before ``on``.
    """
    currency_code_check(from_currency, field="from_currency")
    currency_code_check(to_currency, field="to_currency")
    if from_currency == to_currency:
        return ConvertedAmount(
            amount, to_currency, Decimal(1), on, "same currency", amount, from_currency
        )
    direct = _latest_rate(from_currency, to_currency, on)
    inverse = _latest_rate(to_currency, from_currency, on)
    if direct is None and inverse is None:
        raise NoExchangeRate(
            f"No {from_currency}->{to_currency} exchange rate on or before {on}: add one "
            "before comparing these prices.",
            field="currency",
        )
    if direct is not None and (inverse is None or direct.rate_date >= inverse.rate_date):
        rate, rate_date, source = direct.rate, direct.rate_date, direct.source
    else:
        assert inverse is not None
        rate = (Decimal(1) / inverse.rate).quantize(AMOUNT_QUANTUM)
        rate_date = inverse.rate_date
        source = f"{inverse.source} (inverse of the {to_currency}->{from_currency} rate)"
    converted = (amount * rate).quantize(AMOUNT_QUANTUM)
    return ConvertedAmount(converted, to_currency, rate, rate_date, source, amount, from_currency)


@dataclass
class PriceRange:
    """The cheapest and dearest published price per accelerator-hour of one accelerator."""

    currency: str
    low: Decimal | None = None
    high: Decimal | None = None
    entry_count: int = 0
    providers: set[str] = field(default_factory=set)
    rates_used: set[str] = field(default_factory=set)
    flagged_left_out: int = 0
    not_convertible: int = 0

    def add(self, price: ConvertedAmount, provider: str) -> None:
        self.low = price.amount if self.low is None else min(self.low, price.amount)
        self.high = price.amount if self.high is None else max(self.high, price.amount)
        self.entry_count += 1
        self.providers.add(provider)
        if price.original_currency != price.currency:
            self.rates_used.add(
                f"{price.original_currency}->{price.currency} {price.rate} "
                f"({price.rate_date}, {price.rate_source})"
            )


def accelerator_price_ranges(
    *, viewer: Viewer, currency: str = "USD", accelerators: QuerySet[Accelerator] | None = None
) -> dict[int, PriceRange]:
    """Price range per accelerator id across the entries of every published book
    ``viewer`` sees.

    Prices are converted into ``currency`` at the rate of their book's ``fetched_at`` date;
    entries with a data flag are left out (and counted), as are those without a rate.
    """
    entries = price_entries_published(viewer=viewer)
    if accelerators is not None:
        entries = entries.filter(accelerator__in=accelerators)
    ranges: dict[int, PriceRange] = defaultdict(lambda: PriceRange(currency))
    for entry in entries.filter(~Q(data_flag="")):
        ranges[entry.accelerator_id].flagged_left_out += 1
    unit_by_book: dict[int, ConvertedAmount | None] = {}  # one rate look-up per book
    for entry in entries.filter(data_flag=""):
        if entry.book_id not in unit_by_book:
            unit_by_book[entry.book_id] = _unit_rate(entry.book, currency)
        unit = unit_by_book[entry.book_id]
        if unit is None:
            ranges[entry.accelerator_id].not_convertible += 1
            continue
        price = dataclasses.replace(
            unit,
            amount=(entry.price_per_accelerator_hour * unit.rate).quantize(AMOUNT_QUANTUM),
            original_amount=entry.price_per_accelerator_hour,
        )
        ranges[entry.accelerator_id].add(price, entry.provider.name)
    return dict(ranges)


def _unit_rate(book: PriceBook, currency: str) -> ConvertedAmount | None:
    try:
        return money_convert(
            amount=Decimal(1),
            from_currency=book.currency,
            to_currency=currency,
            on=book.fetched_at.date(),
        )
    except NoExchangeRate:
        return None
