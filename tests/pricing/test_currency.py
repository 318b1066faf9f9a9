import pytest

from pricing.currency import currency_code_check
from pricing.errors import PricingError


def test_currency_code_check_accepts_iso_codes() -> None:
    assert currency_code_check("EUR") == "EUR"


@pytest.mark.parametrize("code", ["usd", "US", "XYZ", ""])
def test_currency_code_check_refuses_other_codes(code: str) -> None:
    with pytest.raises(PricingError, match="unknown currency"):
        currency_code_check(code)
