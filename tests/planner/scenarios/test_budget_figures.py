"""Budget figures against hand-worked numbers (no database)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from planner.scenarios.budget_figures import budget_figures, money

ESTIMATE = {"gpu_hours": 100_000.0, "training_days": 52.0833}
MONTECARLO = {
    "gpu_hours": {"p10": 95_000.0, "p50": 104_000.0, "p90": 118_500.5},
    "training_days": {"p10": 49.5, "p50": 54.2, "p90": 61.7},
}


def _figures(price: str = "2.50") -> dict[str, Any]:
    figures = budget_figures(
        estimate=ESTIMATE,
        montecarlo=MONTECARLO,
        price_per_gpu_hour=Decimal(price),
        currency="USD",
        tokens=2e11,
        tdp_w=700.0,
        pue=Decimal("1.2"),
    )
    return figures.as_json()


def test_costs_are_gpu_hours_times_price_to_the_cent() -> None:
    figures = _figures()
    assert figures["cost"] == {
        "deterministic": "250000.00",
        "p10": "237500.00",
        "p50": "260000.00",
        "p90": "296251.25",  # 118,500.5 h x $2.50
    }


def test_contingency_and_request_are_p90_minus_p50_and_p90() -> None:
    figures = _figures()
    assert figures["contingency"] == "36251.25"
    assert figures["requested"] == "296251.25"


def test_cost_per_million_tokens_and_energy() -> None:
    figures = _figures()
    # $260,000 / 200,000 M tokens = $1.30 per million tokens
    assert figures["cost_per_million_tokens"] == "1.30"
    # 104,000 GPU-h x 0.7 kW x PUE 1.2 = 87,360 kWh
    assert figures["energy_kwh"] == "87360"


def test_money_rounds_half_up_like_an_invoice() -> None:
    assert money(Decimal("0.125")) == Decimal("0.13")
    assert money(Decimal("2.675")) == Decimal("2.68")  # float rounding would give 2.67
    assert _figures("0.0001")["cost"]["p10"] == "9.50"


def test_a_commitment_sets_the_least_each_percentile_costs() -> None:
    figures = budget_figures(
        estimate=ESTIMATE,
        montecarlo=MONTECARLO,
        price_per_gpu_hour=Decimal("2.50"),
        currency="USD",
        tokens=2e11,
        tdp_w=700.0,
        pue=Decimal("1.2"),
        minimum_spend=Decimal("270000"),  # e.g. 16 GPUs x 9 months x 730 h x $2.5685
    ).as_json()
    # P10 and P50 (237,500 and 260,000 at the hourly price) rise to the commitment; P90 is above.
    assert figures["cost"]["p10"] == figures["cost"]["p50"] == "270000.00"
    assert figures["cost"]["p90"] == "296251.25"
    assert figures["minimum_spend_binds"] == ["deterministic", "p10", "p50"]
    assert figures["contingency"] == "26251.25"
