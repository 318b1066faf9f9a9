"""A pruned capacity plan equals the exhaustive one (:mod:`planner.capacity.pruning`): same
options, costs, verdicts and frontier, on the demo's plan, a 100,000-GPU ceiling and a
plan with spot prices and a tight budget; and the pruner's rule on points made by hand."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from organisations.demo import demo_organisation
from planner.capacity.pruning import Pruner
from planner.capacity.search import (
    PricedOption,
    capacity_options,
    capacity_plan,
    capacity_scenario,
    deadline_days,
)
from pricing.demo import EXAMPLE_BOOK_NAME
from pricing.models import PriceBook
from tests.planner.capacity.plans import assert_same_plan

pytestmark = pytest.mark.django_db


def _options(*, max_gpus: int, spot: bool = False, extras: bool = True) -> list[PricedOption]:
    built = capacity_options(
        book=PriceBook.objects.get(name=EXAMPLE_BOOK_NAME),
        include_quotes=extras,
        include_onprem=extras,
        include_spot=spot,
        currency="USD",
        max_gpus=max_gpus,
        on=timezone.localdate(),
        viewer=demo_organisation(),
    )
    return built.options


def _demo_days() -> int:
    """Days to the demo's deadline (2027-06-30), or 200 once that has passed."""
    today = timezone.localdate()
    deadline = date(2027, 6, 30) if date(2027, 6, 30) > today else today + timedelta(days=200)
    return deadline_days(deadline, today=today)


def _both(preset: str, tokens: float, options: list[PricedOption], **limits: Any) -> dict[str, Any]:
    """The pruned plan, checked equal to the exhaustive plan of the same question."""
    scenario = capacity_scenario(preset_id=preset, tokens=tokens)
    pruned = capacity_plan(scenario, options, **limits)
    whole = capacity_plan(scenario, options, exhaustive=True, **limits)
    assert whole["points_skipped"] == 0
    assert_same_plan(pruned, whole)
    assert whole["feasible"]
    assert whole["frontier"]
    return pruned


def test_the_demo_plan_pruned_equals_the_exhaustive_plan(prices: None) -> None:
    options = _options(max_gpus=16_384)
    budget = Decimal("9000000")
    pruned = _both("llama3-70b", 2e12, options, deadline_days=_demo_days(), budget=budget)
    assert pruned["points_skipped"] > 0


def test_a_100000_gpu_ceiling_pruned_equals_the_exhaustive_plan(prices: None) -> None:
    options = _options(max_gpus=100_000, extras=False)
    pruned = _both("llama3-70b", 15e12, options, deadline_days=60, budget=None)
    assert pruned["points_skipped"] > 0


def test_spot_prices_and_a_tight_budget_pruned_equal_the_exhaustive_plan(prices: None) -> None:
    options = _options(max_gpus=4096, spot=True)
    pruned = _both("llama3-8b", 2e12, options, deadline_days=12, budget=Decimal("400000"))
    assert pruned["points_skipped"] > 0


class _Flat:
    """An option at a flat price per device-hour, no commitment."""

    def __init__(self, price: str) -> None:
        self.price = Decimal(price)

    def cost(self, gpu_hours: float, num_gpus: int) -> tuple[Decimal, Decimal]:
        cost = (Decimal(repr(gpu_hours)) * self.price).quantize(Decimal("0.01"))
        return cost, cost


def _pruner(budget: str | None = None) -> Pruner:
    offers = {("H100-SXM", "", size): [_Flat("2")] for size in (8, 16, 64)}
    return Pruner(offers, deadline_days=30, budget=None if budget is None else Decimal(budget))


def test_a_size_that_could_meet_the_deadline_is_searched() -> None:
    pruner = _pruner()
    pruner.known.append((1.0, Decimal("1")))  # faster and cheaper than anything
    # 9,600 device-hours on 16 devices: at least 25 days, within the 30 days.
    assert pruner.can_matter("H100-SXM", "", 16, 9600.0)


def test_a_late_size_is_skipped_only_when_a_faster_point_costs_no_more() -> None:
    pruner = _pruner()
    # 9,600 device-hours on 8 devices: at least 50 days (late), at least 19,200.00.
    assert pruner.can_matter("H100-SXM", "", 8, 9600.0)  # nothing known yet
    pruner.known.append((50.0, Decimal("100")))  # as slow as the floor: not strictly faster
    assert pruner.can_matter("H100-SXM", "", 8, 9600.0)
    pruner.known.append((20.0, Decimal("19200.01")))  # faster, but a cent dearer
    assert pruner.can_matter("H100-SXM", "", 8, 9600.0)
    pruner.known.append((20.0, Decimal("19200.00")))  # faster and no dearer: rules it out
    assert not pruner.can_matter("H100-SXM", "", 8, 9600.0)


def test_a_size_over_budget_is_skipped_once_dominated() -> None:
    pruner = _pruner(budget="1000")
    pruner.known.append((0.5, Decimal("500")))
    # 960 device-hours on 64 devices: 0.625 days, but at least 1,920.00 > the budget.
    assert not pruner.can_matter("H100-SXM", "", 64, 960.0)
    assert pruner.can_matter("H100-SXM", "", 64, 400.0)  # 800.00 may be within budget


def test_learning_prices_a_point_for_every_option_offering_its_size() -> None:
    offers = {("H100-SXM", "", 8): [_Flat("2"), _Flat("3")]}
    pruner = Pruner(offers, deadline_days=30, budget=None)
    pruner.learn_chunks(
        [
            {
                "accelerator": "H100-SXM",
                "capacity": "",
                "points": [{"num_gpus": 8, "gpu_hours": 100.0, "training_days": 0.5}],
            }
        ]
    )
    assert pruner.known == [(0.5, Decimal("200.00")), (0.5, Decimal("300.00"))]


def test_only_sizes_whose_floors_meet_both_limits_may_meet_them() -> None:
    pruner = _pruner(budget="30000")
    # 9,600 device-hours at 2 a device-hour: 19,200.00, within the budget.
    assert pruner.may_meet("H100-SXM", "", 16, 9600.0)  # at least 25 days: in time
    assert not pruner.may_meet("H100-SXM", "", 8, 9600.0)  # at least 50 days: late
    assert not pruner.may_meet("H100-SXM", "", 64, 19200.0)  # 38,400.00: over budget
