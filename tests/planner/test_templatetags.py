"""The number filters: figures with thousands separators and the decimals their size needs."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.template import Context, Template

from planner.common.labels import MEMORY_VERDICTS
from planner.templatetags.numbers import days, device_hours, device_of, money, percent, quantity
from planner.templatetags.verdicts import memory_verdict


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (Decimal("4709376.00"), "4,709,376 USD"),
        (Decimal("4709375.50"), "4,709,376 USD"),  # half up, not to even
        (4709376, "4,709,376 USD"),
        ("1234.5", "1,235 USD"),
        (Decimal("999.99"), "999.99 USD"),
        (Decimal("6.88"), "6.88 USD"),
        (6.8, "6.80 USD"),
        (Decimal("999.996"), "1,000 USD"),  # rounds to 1,000.00: whole units from there
        (Decimal("0"), "0.00 USD"),
        (Decimal("-0.001"), "0.00 USD"),  # never "-0.00"
        (Decimal("-1234567.89"), "-1,234,568 USD"),
        (Decimal("-12.345"), "-12.35 USD"),
        (Decimal("1E+30"), "1,000,000,000,000,000,000,000,000,000,000 USD"),
        (Decimal("12345678901234567890123456789.5"), "12,345,678,901,234,567,890,123,456,790 USD"),
    ],
)
def test_money_groups_thousands_and_keeps_cents_below_a_thousand(value: Any, text: str) -> None:
    assert money(value, "USD") == text


def test_money_without_a_currency_is_the_bare_figure() -> None:
    assert money(Decimal("4709376.00")) == "4,709,376"


@pytest.mark.parametrize("value", [None, ""])
def test_a_missing_figure_reads_as_a_dash(value: Any) -> None:
    assert money(value, "USD") == days(value) == device_hours(value) == percent(value) == "\u2013"


@pytest.mark.parametrize("value", ["n/a", float("inf"), float("nan"), True, [1]])
def test_what_is_not_a_finite_number_comes_back_untouched(value: Any) -> None:
    assert money(value, "USD") is value
    assert days(value) is value


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (12675.9, "12,676 days"),
        (Decimal("12675.9"), "12,676 days"),
        (88.72, "88.7 days"),
        (99.96, "100 days"),
        (100, "100 days"),
        (0.04, "0.0 days"),
        (-3.25, "-3.3 days"),
        (1e9, "1,000,000,000 days"),
    ],
)
def test_days_are_whole_from_a_hundred_and_to_a_tenth_below(value: Any, text: str) -> None:
    assert days(value) == text


def test_quantity_is_the_figure_of_days_without_the_unit() -> None:
    assert (quantity(12675.9), quantity("88.72"), quantity(None)) == ("12,676", "88.7", "\u2013")


@pytest.mark.parametrize(
    ("value", "device", "text"),
    [
        (796442.9475, "GPU", "796,443 GPU-hours"),
        (1223447.13, "chip", "1,223,447 chip-hours"),
        (Decimal("12.25"), "GPU", "12.3 GPU-hours"),
        (5, "", "5.0 GPU-hours"),
    ],
)
def test_device_hours_name_the_device(value: Any, device: str, text: str) -> None:
    assert device_hours(value, device) == text


@pytest.mark.parametrize(
    ("value", "places", "text"),
    [
        (0.588, 1, "58.8 %"),
        (Decimal("0.5830227534709952"), 1, "58.3 %"),
        ("0.05", 1, "5.0 %"),
        (1.25, 0, "125 %"),
        (-0.0123, 1, "-1.2 %"),
        (-0.0001, 1, "0.0 %"),
        (123.456, 1, "12,345.6 %"),
    ],
)
def test_percent_shows_a_fraction_as_a_percentage(value: Any, places: int, text: str) -> None:
    assert percent(value, places) == text


@pytest.mark.parametrize(
    ("catalog_id", "word"),
    [("H100-SXM", "GPU"), ("MI300X", "GPU"), ("TPU-v5p", "chip"), ("Trainium2", "chip"),
     ("Gaudi3", "accelerator"), ("not-in-the-catalog", "accelerator")],
)  # fmt: skip
def test_device_of_names_what_one_accelerator_is_called(catalog_id: str, word: str) -> None:
    assert device_of(catalog_id) == word


def test_the_filters_load_in_a_template() -> None:
    template = Template(
        "{% load numbers %}{{ cost|money:currency }} · {{ d|days }} · "
        "{{ h|device_hours:device }} · {{ mfu|percent }}"
    )
    context = Context(
        {"cost": Decimal("4709376.00"), "currency": "USD", "d": 12675.9, "h": 796442.9,
         "device": "chip", "mfu": 0.588}
    )  # fmt: skip
    assert template.render(context) == "4,709,376 USD · 12,676 days · 796,443 chip-hours · 58.8 %"


@pytest.mark.parametrize(
    ("value", "code", "tone"),
    [
        ({"memory_verdict": "tight", "fits_in_memory": True}, "tight", "warn"),
        ({"fits_in_memory": False}, "does_not_fit", "bad"),
        (
            {"fits_in_memory": True, "memory_headroom": {"usable_gib": 43.2, "headroom_gib": -3.8}},
            "tight",
            "warn",
        ),
        ("fits", "fits", "good"),
    ],
)
def test_memory_verdict_gives_one_label_and_tone(value: object, code: str, tone: str) -> None:
    verdict = memory_verdict(value)
    assert verdict is not None
    assert (verdict["code"], verdict["tone"]) == (code, tone)
    assert verdict["label"] == {c: label for c, label, _ in MEMORY_VERDICTS}[code]


def test_memory_verdict_of_nothing_is_none() -> None:
    assert memory_verdict(None) is None
    assert memory_verdict({}) is None
