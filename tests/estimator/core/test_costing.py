"""One money rule, GPU-hours x price, for the core's floats and the planner's Decimals."""

from __future__ import annotations

from decimal import Decimal

import numpy as np

from estimator.core.costing import cost_of


def test_cost_of_is_one_rule_for_floats_arrays_and_decimals() -> None:
    assert cost_of(1000.0, 2.5) == 2500.0
    assert cost_of(Decimal("1000.5"), Decimal("2.25")) == Decimal("2251.125")
    hours = np.array([10.0, 20.0])
    np.testing.assert_array_equal(cost_of(hours, np.array([1.5, 2.0])), [15.0, 40.0])
