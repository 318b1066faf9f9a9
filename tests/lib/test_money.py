"""How amounts and prices are written: the admin, the price pickers and the pages share it."""

from __future__ import annotations

from decimal import Decimal

from lib.money import decimal_trimmed, money_text, price_per_hour_text, unit_price_text


def test_money_text_writes_large_amounts_whole_and_small_ones_to_the_cent() -> None:
    assert money_text(Decimal("4709376.00"), "USD") == "4,709,376 USD"
    assert money_text(Decimal("6.88"), "EUR") == "6.88 EUR"
    assert money_text(Decimal("999.996"), "USD") == "1,000 USD"  # judged after rounding
    assert money_text(Decimal("-0.001")) == "0.00"


def test_price_per_hour_text_drops_two_trailing_zeros_of_four_places() -> None:
    assert price_per_hour_text(Decimal("2.1000000000"), "USD") == "2.10 USD/GPU-h"
    assert price_per_hour_text(Decimal("3.43088125"), "USD") == "3.4309 USD/GPU-h"
    assert price_per_hour_text(Decimal("4.2"), "USD", "chip") == "4.20 USD/chip-h"
    assert unit_price_text(Decimal("0.0230000000"), "USD", "GB-month") == "0.0230 USD/GB-month"


def test_decimal_trimmed_keeps_two_places_and_no_more_zeros() -> None:
    assert decimal_trimmed(Decimal("2.1000000000")) == "2.10"
    assert decimal_trimmed(Decimal("0.0230000000")) == "0.023"
    assert decimal_trimmed(Decimal("12")) == "12.00"
    assert decimal_trimmed(Decimal("1.0800"), 0) == "1.08"
    assert decimal_trimmed(Decimal("3.0000"), 0) == "3"
