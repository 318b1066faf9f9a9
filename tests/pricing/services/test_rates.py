from datetime import date
from decimal import Decimal

import pytest

from pricing.errors import DuplicateRecord, PricingError
from pricing.services import exchange_rate_create

pytestmark = pytest.mark.django_db


def _create(**changes: object) -> None:
    values: dict[str, object] = {
        "base_currency": "EUR",
        "quote_currency": "USD",
        "rate": Decimal("1.1"),
        "rate_date": date(2026, 1, 2),
        "source": "ECB reference rate",
    }
    exchange_rate_create(**(values | changes))  # type: ignore[arg-type]


def test_exchange_rate_create_refuses_a_second_rate_for_the_same_day() -> None:
    _create()
    with pytest.raises(DuplicateRecord):
        _create(rate=Decimal("1.2"))


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"rate": Decimal(0)}, "rate"),
        ({"quote_currency": "EUR"}, "quote_currency"),
        ({"base_currency": "eur"}, "base_currency"),
        ({"source": " "}, "source"),
    ],
)
def test_exchange_rate_create_refuses_bad_values(changes: dict, field: str) -> None:
    with pytest.raises(PricingError) as refused:
        _create(**changes)
    assert refused.value.field == field
