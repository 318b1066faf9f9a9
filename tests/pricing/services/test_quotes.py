from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from organisations.demo import demo_organisation
from pricing.errors import PricingError, QuoteNotSelectable
from pricing.models import Accelerator, VendorQuote
from pricing.services import quote_assert_selectable, quote_create, quote_expire, quote_update

pytestmark = pytest.mark.django_db


def _quote(catalog: dict[str, Accelerator], **changes: object) -> VendorQuote:
    values: dict[str, object] = {
        "vendor": "Acme Compute",
        "accelerator": catalog["H100-SXM"],
        "accelerator_count": 256,
        "price_per_accelerator_hour": Decimal("2.10"),
        "currency": "USD",
        "valid_from": date(2026, 1, 1),
        "valid_until": date(2026, 3, 31),
    }
    return quote_create(user=None, organisation=demo_organisation(), **(values | changes))


def test_quote_create_derives_the_hourly_price_from_a_total_for_a_term(
    catalog: dict[str, Accelerator],
) -> None:
    quote = _quote(
        catalog,
        price_per_accelerator_hour=None,
        total_price=Decimal("4709376.00"),
        term_months=12,
    )
    assert quote.price_basis == VendorQuote.PriceBasis.TERM_TOTAL
    assert quote.price_per_accelerator_hour == Decimal("2.10")  # / (256 x 12 x 730 h)


def test_quote_create_refuses_a_validity_that_ends_before_it_starts(
    catalog: dict[str, Accelerator],
) -> None:
    with pytest.raises(PricingError) as refused:
        _quote(catalog, valid_until=date(2025, 12, 31))
    assert refused.value.field == "valid_until"


def test_quote_assert_selectable_refuses_an_expired_quote(catalog: dict[str, Accelerator]) -> None:
    quote = _quote(catalog)
    quote_assert_selectable(quote, on=date(2026, 3, 31))
    with pytest.raises(QuoteNotSelectable, match="expired on 2026-03-31"):
        quote_assert_selectable(quote, on=date(2026, 4, 1))


def test_quote_assert_selectable_refuses_a_quote_not_yet_valid(
    catalog: dict[str, Accelerator],
) -> None:
    with pytest.raises(QuoteNotSelectable, match="valid only from 2026-01-01"):
        quote_assert_selectable(_quote(catalog), on=date(2025, 12, 31))


def test_quote_update_to_an_hourly_price_drops_the_total(catalog: dict[str, Accelerator]) -> None:
    quote = _quote(
        catalog, price_per_accelerator_hour=None, total_price=Decimal("4709376"), term_months=12
    )
    quote_update(quote=quote, price_per_accelerator_hour=Decimal("1.99"))
    quote.refresh_from_db()
    assert (quote.price_basis, quote.total_price) == (VendorQuote.PriceBasis.HOURLY, None)
    assert quote.price_per_accelerator_hour == Decimal("1.99")


def test_quote_expire_ends_the_validity_the_day_before(catalog: dict[str, Accelerator]) -> None:
    quote = quote_expire(quote=_quote(catalog), on=date(2026, 2, 10))
    assert (quote.valid_from, quote.valid_until) == (date(2026, 1, 1), date(2026, 2, 9))
    assert quote.validity_on(date(2026, 2, 10)) == "expired"
    with pytest.raises(QuoteNotSelectable):
        quote_assert_selectable(quote, on=date(2026, 2, 10))


def test_quote_expire_keeps_the_dates_of_a_quote_not_yet_valid_in_order(
    catalog: dict[str, Accelerator],
) -> None:
    quote = quote_expire(quote=_quote(catalog), on=date(2025, 6, 1))
    assert (quote.valid_from, quote.valid_until) == (date(2025, 5, 31), date(2025, 5, 31))
    already = quote_expire(quote=quote, on=date(2026, 6, 1))  # expired already: unchanged
    assert already.valid_until == date(2025, 5, 31)
