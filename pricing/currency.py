"""Currencies and converted amounts (pure Python, no Django).

Every price keeps its own currency. A conversion for a comparison returns a
:class:`ConvertedAmount` that carries the rate it used, the rate's date and its source, so a
reader can always tell where a converted figure came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from lib.money import currency_refusal
from pricing.errors import PricingError


def currency_code_check(code: str, *, field: str = "currency") -> str:
    """Return ``code`` if it is an ISO 4217 code we know; raise :class:`PricingError` if not."""
    refusal = currency_refusal(code)
    if refusal is not None:
        raise PricingError(refusal, field=field)
    return code


@dataclass(frozen=True)
class ConvertedAmount:
    """An amount converted into another currency, with the rate that converted it.

    ``amount = original_amount x rate``. When no conversion was needed (same currency)
    the rate is 1 and ``rate_source`` says so.
    """

    amount: Decimal
    currency: str
    rate: Decimal
    rate_date: date
    rate_source: str
    original_amount: Decimal
    original_currency: str

    def __str__(self) -> str:
        return (
            f"{self.amount} {self.currency} (from {self.original_amount} "
            f"{self.original_currency} at {self.rate} on {self.rate_date}, {self.rate_source})"
        )
