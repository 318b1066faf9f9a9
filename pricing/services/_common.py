"""Helpers shared by the pricing services."""

from __future__ import annotations

from decimal import Decimal

from pricing.errors import PricingError


def positive_check(value: Decimal | int | None, *, field: str, what: str = "value") -> None:
    """Refuse a missing, zero or negative amount, naming it."""
    if value is None:
        raise PricingError(f"{what} is required", field=field)
    if value < 0:
        raise PricingError(f"negative {what} {value}: must be positive", field=field)
    if value == 0:
        raise PricingError(f"{what} must be positive, got 0", field=field)
