"""Template filters that write figures the way a finance reader expects them.

``{% load numbers %}``, then ``{{ total|money:"USD" }}`` -> ``4,709,376 USD``,
``{{ days|days }}`` -> ``12,676 days``, ``{{ hours|device_hours }}`` -> ``796,443 GPU-hours``,
``{{ mfu|percent }}`` -> ``58.8 %`` and ``{{ scenario.accelerator_id|device_of }}`` -> ``chip``.
The figures take a ``Decimal``, float, int or numeric text; ``None`` or an empty value reads as
a dash, and anything else comes back untouched, as with Django's own filters, so a page never
fails on a figure.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import template

from estimator.core.catalog import load_catalog
from lib.money import decimal_or_none as _decimal
from lib.money import grouped as _grouped
from lib.money import rounded as _rounded
from planner.scenarios.prices import device_word

register = template.Library()

#: What a missing figure reads as.
MISSING = "\u2013"  # an en dash
#: From this size on, money is shown in whole units and counts without a decimal.
WHOLE_FROM = {"money": Decimal(1000), "quantity": Decimal(100)}


def _figure(value: Any, kind: str, small_places: int) -> str | None:
    """The grouped text of ``value``: whole from :data:`WHOLE_FROM`, else ``small_places``.

    The size is judged after rounding, so ``999.996`` is ``1,000``, not ``1,000.00``.
    """
    number = _decimal(value)
    if number is None:
        return None
    small = _rounded(number, small_places)
    return _grouped(number, 0 if abs(small) >= WHOLE_FROM[kind] else small_places)


def _with_unit(value: Any, text: str | None, unit: str) -> Any:
    if value is None or value == "":
        return MISSING
    if text is None:
        return value
    return f"{text} {unit}".rstrip()


@register.filter
def money(value: Any, currency: str = "") -> Any:
    """``4709376.00`` as ``4,709,376``; below 1,000 to the cent: ``6.88``. [currency]"""
    return _with_unit(value, _figure(value, "money", 2), currency or "")


@register.filter
def quantity(value: Any) -> Any:
    """A measured amount: ``12675.9`` as ``12,676``, ``88.72`` as ``88.7``."""
    return _with_unit(value, _figure(value, "quantity", 1), "")


@register.filter
def days(value: Any) -> Any:
    """A duration in days: ``12675.9`` as ``12,676 days``, ``88.72`` as ``88.7 days``. [d]"""
    return _with_unit(value, _figure(value, "quantity", 1), "days")


@register.filter
def device_hours(value: Any, device: str = "GPU") -> Any:
    """Accelerator-hours: ``796442.9`` as ``796,443 GPU-hours``; ``|device_hours:"chip"``."""
    return _with_unit(value, _figure(value, "quantity", 1), f"{device or 'GPU'}-hours")


@register.filter
def percent(value: Any, places: int = 1) -> Any:
    """A fraction as a percentage: ``0.588`` as ``58.8 %``, ``1.25`` as ``125.0 %``."""
    number = _decimal(value)
    text = None if number is None else _grouped(number * 100, int(places))
    return _with_unit(value, text, "%")


@register.filter
def device_of(catalog_id: Any) -> str:
    """What one accelerator of a catalog id is called: ``TPU-v5p`` -> ``chip``, else ``GPU``.

    An id the catalog does not know (a custom SKU) reads ``accelerator``.
    """
    spec = load_catalog().get(str(catalog_id))
    return device_word(spec.family if spec else "generic")
