"""estimator.calibration.spread: the families' spread and the between-stack spread, and
the shipped between-stack spread against the stored predictions (no database)."""

from __future__ import annotations

import json
import math
from statistics import NormalDist

import numpy as np
import pytest
from numpy.testing import assert_allclose

from estimator.calibration.loading import load_cases
from estimator.calibration.spread import (
    MIN_SIGMA,
    Z_80,
    between_stack_spread,
    family_spread,
    stack_errors,
    weighted_quantile,
)
from estimator.core import calibration

from .sample_cases import SHARED_CASES


def test_family_spread_band_holds_80_percent_of_lognormal_errors() -> None:
    rng = np.random.default_rng(0)
    errors = list(0.2 * rng.standard_normal(20000))
    sigma, bias = family_spread(errors)
    assert_allclose(sigma, 0.2, rtol=0.03)
    inside = np.mean(np.abs(errors) <= NormalDist().inv_cdf(0.9) * sigma)
    assert_allclose(inside, 0.80, atol=0.01)
    assert abs(bias) < 0.01
    assert family_spread([]) == (calibration.UNMEASURED_SIGMA, 0.0)
    assert family_spread([0.0, 0.001])[0] == MIN_SIGMA


def test_weighted_quantile_weighs_each_value() -> None:
    assert weighted_quantile([3.0, 1.0, 2.0], [1.0, 1.0, 1.0], 0.5) == 2.0
    # One value carrying most of the weight is the quantile of most of the range.
    assert weighted_quantile([1.0, 2.0, 3.0], [0.1, 0.1, 5.0], 0.2) == 3.0
    assert weighted_quantile([1.0, 2.0, 3.0], [5.0, 0.1, 0.1], 0.8) == 1.0


def test_between_stack_spread_is_what_the_family_spread_leaves() -> None:
    # Two stacks, equal weight whatever their case counts: |e| of 0.1 (x 9) and 0.5 (x 1).
    # The weighted P80 of |e| is 0.5 (the second stack holds half the weight), so
    # S = 0.5 / Phi^-1(0.9) and tau = sqrt(S^2 - 0.1^2).
    errors = {"a": [(0.1, 0.1)] * 9, "b": [(-0.5, 0.1)]}
    spread = 0.5 / Z_80
    assert_allclose(between_stack_spread(errors), math.sqrt(spread**2 - 0.01), rtol=1e-12)
    # Left out, a stack's own errors do not widen the band it is scored against.
    assert_allclose(
        between_stack_spread(errors, leave_out="b"),
        math.sqrt(max(0.0, (0.1 / Z_80) ** 2 - 0.01)),
        rtol=1e-12,
    )
    assert between_stack_spread({}) == 0.0
    # Errors the families' own spread explains leave no between-stack spread.
    assert between_stack_spread({"a": [(0.01, 0.2)] * 5}) == 0.0


@pytest.mark.skipif(not SHARED_CASES.exists(), reason="needs ../shared/calibration")
def test_shipped_tau_is_the_spread_of_the_left_out_stacks() -> None:
    record = json.loads(calibration.FIT_PATH.read_text(encoding="utf-8"))
    sigmas = {k: float(v["sigma"]) for k, v in record["families"].items()}
    errors = stack_errors(load_cases(SHARED_CASES), record["out_of_stack"], sigmas)
    assert "megatron-2021" not in errors  # a period stack is not what "auto" stands for
    pooled = record["stacks"]["pooled"]
    assert_allclose(pooled["sigma"], between_stack_spread(errors), atol=1e-4)
    assert pooled["sigma"] == calibration.BETWEEN_STACK_SIGMA
    for stack, tau in pooled["sigma_without"].items():
        assert_allclose(tau, between_stack_spread(errors, leave_out=stack), atol=1e-4)
