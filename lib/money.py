"""Money plumbing every app shares: how amounts are stored and which currencies we accept.

Amounts are ``Decimal`` with an explicit currency (never a float outside the Monte Carlo);
the database keeps them at :data:`MONEY_PLACES` decimal places.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, InvalidOperation, localcontext
from typing import Any

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


# --- How amounts are written ---------------------------------------------------------------

#: From this size on, money is written in whole units (``4,709,376``), below it to the cent.
WHOLE_MONEY_FROM = Decimal(1000)


def decimal_or_none(value: Any) -> Decimal | None:
    """``value`` as a finite Decimal; None when it is not a number (or is inf or NaN)."""
    if isinstance(value, bool):
        return None
    try:
        number = value if isinstance(value, Decimal) else Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        return None
    return number if number.is_finite() else None


def rounded(number: Decimal, places: int) -> Decimal:
    """``number`` rounded half up to ``places`` decimals, however many digits it has."""
    with localcontext(prec=max(number.adjusted(), 0) + places + 2):
        return number.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)


def grouped(number: Decimal, places: int) -> str:
    """``number`` to ``places`` decimals with thousands separators; never ``-0``."""
    value = rounded(number, places)
    return f"{value if value else value.copy_abs():,.{places}f}"


def money_text(amount: Decimal, currency: str = "") -> str:
    """``4709376.00`` as ``4,709,376 USD``; below 1,000 to the cent: ``6.88 USD``.

    The size is judged after rounding, so ``999.996`` is ``1,000``, not ``1,000.00``.
    """
    places = 0 if abs(rounded(amount, 2)) >= WHOLE_MONEY_FROM else 2
    return f"{grouped(amount, places)} {currency}".rstrip()


def unit_price_text(amount: Decimal, currency: str, unit: str) -> str:
    """``0.023`` per GB-month as ``0.0230 USD/GB-month``, ``2.1000000000`` per GPU-hour as
    ``2.10 USD/GPU-h``: four places, two of them dropped when they are zeros."""
    text = f"{amount:,.4f}"
    return f"{text[:-2] if text.endswith('00') else text} {currency}/{unit}"


def price_per_hour_text(amount: Decimal, currency: str, device: str = "GPU") -> str:
    """``3.43088125`` as ``3.4309 USD/GPU-h``, ``2.1000000000`` as ``2.10 USD/GPU-h``;
    ``device`` names the accelerator: ``4.20 USD/chip-h`` for a TPU."""
    return unit_price_text(amount, currency, f"{device}-h")


def decimal_trimmed(value: Decimal, places: int = 2) -> str:
    """A stored ``Decimal`` as a person types it: ``2.1000000000`` as ``2.10``, ``0.0230000000``
    as ``0.023``; at least ``places`` decimals, none of the trailing zeros beyond them."""
    text = f"{value:f}"
    if "." not in text:
        return f"{text}.{'0' * places}" if places else text
    whole, fraction = text.split(".")
    fraction = fraction.rstrip("0").ljust(places, "0")
    return f"{whole}.{fraction}" if fraction else whole
