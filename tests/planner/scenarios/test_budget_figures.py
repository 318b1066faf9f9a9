"""Budget figures against hand-worked numbers (no database)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from planner.scenarios.budget_figures import budget_figures, commitment_use, money

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
        committed=(16, 9),
    ).as_json()
    # The P50 run's use of it: 104,000 of 16 x 9 x 730 = 105,120 GPU-hours, at
    # 270,000 / 104,000 = 2.5962 -> 2.60 USD per GPU-hour used.
    use = figures["commitment"]
    assert (use["committed_gpu_hours"], use["used_gpu_hours"]) == ("105120", "104000")
    assert use["used_share"] == pytest.approx(104_000 / 105_120, rel=1e-12)
    assert use["cost_per_used_gpu_hour"] == "2.60"
    # P10 and P50 (237,500 and 260,000 at the hourly price) rise to the commitment; P90 is above.
    assert figures["cost"]["p10"] == figures["cost"]["p50"] == "270000.00"
    assert figures["cost"]["p90"] == "296251.25"
    assert figures["minimum_spend_binds"] == ["deterministic", "p10", "p50"]
    assert figures["contingency"] == "26251.25"


def test_commitment_use_matches_the_hand_computed_shares() -> None:
    # 256 H100 x 12 months x 730 h = 2,242,560 committed GPU-hours for 4,709,376 USD. A run of
    # 186,000 GPU-hours uses 186,000 / 2,242,560 = 8.294 % of it, 91.706 % idle, and costs the
    # whole commitment: 4,709,376 / 186,000 = 25.3192 -> 25.32 USD per GPU-hour it uses.
    use = commitment_use(
        minimum_spend=Decimal("4709376"),
        accelerators=256,
        term_months=12,
        gpu_hours=Decimal(186_000),
        cost=Decimal("4709376.00"),
    )
    assert use["committed_gpu_hours"] == "2242560"
    assert use["used_share"] == pytest.approx(186_000 / 2_242_560, rel=1e-12)
    assert use["idle_share"] == pytest.approx(1 - 186_000 / 2_242_560, rel=1e-12)
    assert use["cost_per_used_gpu_hour"] == "25.32"
    assert use["binds"] is True
    assert use["minimum_spend"] == "4709376.00"


def test_a_run_using_more_than_its_commitment_has_no_idle_share() -> None:
    use = commitment_use(
        minimum_spend=Decimal("1000"),
        accelerators=1,
        term_months=1,
        gpu_hours=Decimal(1000),  # above the 730 committed hours
        cost=Decimal("2000.00"),  # 1,000 h x 2 USD
    )
    assert (use["used_share"], use["idle_share"]) == (1.0, 0.0)
    assert use["cost_per_used_gpu_hour"] == "2.00"
    assert use["binds"] is False
