"""The on-prem cost model against the reference's hand-worked example.

The reference rounds its figures to about three significant figures, so yearly figures are
compared within 0.5 % and prices per GPU-hour to the cent.
"""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any

import pytest

from pricing.errors import PricingError
from pricing.tco import OnPremInputs, capital_recovery_factor, onprem_cost

RTOL = Decimal("0.005")
WORKED_EXAMPLE = OnPremInputs(
    server_price=Decimal(270000),
    gpus_per_server=8,
    network_share_percent=Decimal(19),
    depreciation_years=4,
    cost_of_capital_percent=Decimal(8),
    power_per_gpu_w=Decimal(700),
    server_power_overhead=Decimal("1.82"),
    average_load_percent=Decimal(75),
    pue=Decimal("1.25"),
    electricity_price_per_kwh=Decimal("0.08"),
    colocation_price_per_kw_month=Decimal(200),
    operations_share_percent=Decimal(5),
    utilisation_percent=Decimal(80),
)


def _close(actual: Decimal, expected: Decimal, rtol: Decimal = RTOL) -> bool:
    return abs(actual - expected) <= rtol * abs(expected)


def _cents(amount: Decimal) -> Decimal:
    return amount.quantize(Decimal("0.01"))


def test_capital_recovery_factor_matches_the_worked_example() -> None:
    assert capital_recovery_factor(Decimal("0.08"), 4).quantize(Decimal("0.0001")) == Decimal(
        "0.3019"
    )


def test_capital_recovery_factor_without_interest_is_straight_line() -> None:
    assert capital_recovery_factor(Decimal(0), 4) == Decimal("0.25")


def test_onprem_cost_worked_example_breakdown_per_gpu_year() -> None:
    cost = onprem_cost(WORKED_EXAMPLE)
    assert _close(cost.capital_per_gpu, Decimal(41667))
    assert _close(cost.capital_per_gpu_year, Decimal(12580))
    assert _close(cost.power_per_gpu_year, Decimal(840))
    assert _close(cost.colocation_per_gpu_year, Decimal(3060))
    assert _close(cost.operations_per_gpu_year, Decimal(2080))
    assert _close(cost.total_per_gpu_year, Decimal(18560))


def test_onprem_cost_worked_example_is_2_65_per_gpu_hour_at_80_percent() -> None:
    cost = onprem_cost(WORKED_EXAMPLE)
    assert _cents(cost.price_per_gpu_hour) == Decimal("2.65")
    parts = (
        cost.capital_per_gpu_hour
        + cost.power_per_gpu_hour
        + cost.colocation_per_gpu_hour
        + cost.operations_per_gpu_hour
    )
    assert parts == cost.price_per_gpu_hour


@pytest.mark.parametrize(("utilisation", "price"), [("100", "2.12"), ("40", "5.30")])
def test_onprem_cost_worked_example_scales_with_utilisation(utilisation: str, price: str) -> None:
    inputs = dataclasses.replace(WORKED_EXAMPLE, utilisation_percent=Decimal(utilisation))
    assert _cents(onprem_cost(inputs).price_per_gpu_hour) == Decimal(price)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("utilisation_percent", Decimal(0)),
        ("utilisation_percent", Decimal(101)),
        ("network_share_percent", Decimal(100)),
        ("pue", Decimal("0.9")),
        ("gpus_per_server", 0),
        ("server_price", Decimal(-1)),
        ("depreciation_years", 0),
    ],
)
def test_onprem_cost_refuses_out_of_range_input_naming_it(field: str, value: Any) -> None:
    with pytest.raises(PricingError) as refused:
        onprem_cost(dataclasses.replace(WORKED_EXAMPLE, **{field: value}))
    assert refused.value.field == field
