"""Exchange rates: dated, with their source."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from pricing.currency import currency_code_check
from pricing.errors import DuplicateRecord, PricingError
from pricing.models import ExchangeRate
from pricing.services._common import positive_check


def exchange_rate_create(
    *, base_currency: str, quote_currency: str, rate: Decimal, rate_date: date, source: str
) -> ExchangeRate:
    """Record that 1 ``base_currency`` = ``rate`` ``quote_currency`` from ``rate_date`` on."""
    exchange_rate_values_check(
        base_currency=base_currency,
        quote_currency=quote_currency,
        rate=rate,
        rate_date=rate_date,
        source=source,
    )
    return ExchangeRate.objects.create(
        base_currency=base_currency,
        quote_currency=quote_currency,
        rate=rate,
        rate_date=rate_date,
        source=source.strip(),
    )


def exchange_rate_values_check(
    *, base_currency: str, quote_currency: str, rate: Decimal, rate_date: date, source: str
) -> None:
    currency_code_check(base_currency, field="base_currency")
    currency_code_check(quote_currency, field="quote_currency")
    if base_currency == quote_currency:
        raise PricingError("must differ from base_currency", field="quote_currency")
    positive_check(rate, field="rate", what="rate")
    if not (source or "").strip():
        raise PricingError("say where the rate comes from", field="source")
    same_day = ExchangeRate.objects.filter(
        base_currency=base_currency, quote_currency=quote_currency, rate_date=rate_date
    )
    if same_day.exists():
        raise DuplicateRecord(
            f"a {base_currency}->{quote_currency} rate for {rate_date} exists", field="rate_date"
        )
