"""Money plumbing every app shares: how amounts are stored and which currencies we accept.

Amounts are ``Decimal`` with an explicit currency (never a float outside the Monte Carlo);
the database keeps them at :data:`MONEY_PLACES` decimal places.
"""

from __future__ import annotations

#: Total digits and decimal places of every stored amount (``DecimalField``).
MONEY_DIGITS, MONEY_PLACES = 18, 2

# ISO 4217 codes we accept; extend the set when a vendor bills in another currency.
CURRENCIES = frozenset(
    {
        "AUD", "BRL", "CAD", "CHF", "CNY", "CZK", "DKK", "EUR", "GBP", "HKD", "IDR", "ILS",
        "INR", "JPY", "KRW", "MXN", "NOK", "NZD", "PLN", "SAR", "SEK", "SGD", "TWD", "USD",
        "AED", "ZAR",
    }
)  # fmt: skip


def currency_refusal(code: str) -> str | None:
    """Why ``code`` is not a currency we accept, or ``None`` when it is one."""
    if code in CURRENCIES:
        return None
    return f"unknown currency {code!r}: use an upper-case ISO 4217 code such as USD or EUR"
