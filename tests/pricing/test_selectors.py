from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from django.contrib.auth.models import User

from organisations.demo import demo_organisation
from pricing.errors import NoExchangeRate
from pricing.models import Accelerator, PriceBook, Provider, VendorQuote
from pricing.selectors import accelerator_price_ranges, money_convert, quotes_selectable
from pricing.services import (
    exchange_rate_create,
    price_book_create,
    price_book_publish,
    price_entry_create,
    quote_create,
)

pytestmark = pytest.mark.django_db


def _rate(base: str, quote: str, rate: str, on: date, source: str = "test ECB") -> None:
    exchange_rate_create(
        base_currency=base, quote_currency=quote, rate=Decimal(rate), rate_date=on, source=source
    )


def test_money_convert_uses_the_latest_rate_on_or_before_the_date() -> None:
    _rate("EUR", "USD", "1.10", date(2025, 1, 1), "rate A")
    _rate("EUR", "USD", "1.20", date(2025, 6, 1), "rate B")
    converted = money_convert(
        amount=Decimal(100), from_currency="EUR", to_currency="USD", on=date(2025, 5, 31)
    )
    assert converted.amount == Decimal(110)
    assert converted.currency == "USD"
    assert (converted.rate, converted.rate_date, converted.rate_source) == (
        Decimal("1.10"),
        date(2025, 1, 1),
        "rate A",
    )
    later = money_convert(
        amount=Decimal(100), from_currency="EUR", to_currency="USD", on=date(2025, 6, 1)
    )
    assert (later.amount, later.rate_date, later.rate_source) == (
        Decimal(120),
        date(2025, 6, 1),
        "rate B",
    )


def test_money_convert_inverts_the_opposite_rate_and_says_so() -> None:
    _rate("EUR", "USD", "1.25", date(2025, 1, 1))
    converted = money_convert(
        amount=Decimal(100), from_currency="USD", to_currency="EUR", on=date(2025, 2, 1)
    )
    assert converted.rate == Decimal("0.8")
    assert converted.amount == Decimal(80)
    assert "inverse" in converted.rate_source


def test_money_convert_refuses_when_no_rate_exists_on_or_before_the_date() -> None:
    _rate("EUR", "USD", "1.10", date(2025, 1, 1))
    with pytest.raises(NoExchangeRate, match="No EUR->USD exchange rate on or before 2024-12-31"):
        money_convert(
            amount=Decimal(1), from_currency="EUR", to_currency="USD", on=date(2024, 12, 31)
        )


def test_money_convert_same_currency_needs_no_rate() -> None:
    converted = money_convert(
        amount=Decimal("2.5"), from_currency="USD", to_currency="USD", on=date(2020, 1, 1)
    )
    assert (converted.amount, converted.rate, converted.rate_source) == (
        Decimal("2.5"),
        Decimal(1),
        "same currency",
    )


def test_quotes_selectable_leaves_out_expired_and_early_quotes(
    catalog: dict[str, Accelerator],
) -> None:
    def quote(vendor: str, start: date, end: date) -> VendorQuote:
        return quote_create(
            user=None,
            organisation=demo_organisation(),
            vendor=vendor,
            accelerator=catalog["H100-SXM"],
            accelerator_count=64,
            price_per_accelerator_hour=Decimal("2.50"),
            currency="USD",
            valid_from=start,
            valid_until=end,
        )

    valid = quote("valid", date(2026, 1, 1), date(2026, 12, 31))
    quote("expired", date(2025, 1, 1), date(2025, 12, 31))
    quote("early", date(2027, 1, 1), date(2027, 6, 30))
    assert list(quotes_selectable(on=date(2026, 6, 1), quotes=VendorQuote.objects.all())) == [valid]
    assert list(quotes_selectable(on=date(2026, 12, 31), quotes=VendorQuote.objects.all())) == [
        valid
    ]


def test_accelerator_price_ranges_convert_and_leave_flagged_entries_out(
    published_book: PriceBook, catalog: dict[str, Accelerator], providers: dict[str, Provider]
) -> None:
    euro_book = price_book_create(
        user=None,
        name="EU",
        currency="EUR",
        source="test",
        fetched_at=datetime(2026, 2, 1, tzinfo=UTC),
    )
    for price, flag in (("2.00", ""), ("0.10", "SUSPECT")):
        price_entry_create(
            book=euro_book,
            provider=providers["gcp"],
            region="europe-west4" if not flag else "us-central1",
            accelerator=catalog["H100-SXM"],
            pricing_type="on_demand",
            price_per_accelerator_hour=Decimal(price),
            data_flag=flag,
        )
    price_book_publish(book=euro_book, user=None)
    _rate("EUR", "USD", "1.5", date(2026, 1, 1), "test rate")
    everyone = User.objects.create_superuser("root")
    price_range = accelerator_price_ranges(viewer=everyone, currency="USD")[catalog["H100-SXM"].pk]
    assert price_range.low == Decimal("3.00")  # 2.00 EUR at 1.5
    assert price_range.high == Decimal("6.88")  # 55.04 / 8 from the USD book
    assert price_range.entry_count == 3
    assert price_range.flagged_left_out == 1
    assert any("EUR->USD 1.5" in rate for rate in price_range.rates_used)
