"""Goodput against the Llama 3 405B reference point (Dubey et al. 2024, section 3.3.4)."""

from __future__ import annotations

import math

from numpy.testing import assert_allclose

from estimator.core import goodput as g
from estimator.core.estimate import estimate

from .scenarios import LLAMA3_405B


def test_goodput_llama3_interruptions_in_54_days() -> None:
    # 466 job interruptions in a 54-day snapshot on 16,384 H100 GPUs.
    result = g.goodput(405e9, 16384)
    assert_allclose(result.interruptions_per_day * 54, 466, rtol=1e-9)


def test_goodput_llama3_above_90_percent() -> None:
    # "... achieved higher than 90% effective training time".
    assert 0.9 < g.goodput(405e9, 16384).goodput < 1.0


def test_goodput_estimate_llama3_scenario_above_90_percent() -> None:
    # Llama 3's "effective training time" counts interruptions (checkpoint writes, lost
    # work and restarts) only; the estimate's goodput is steady state over the whole run,
    # which also holds evaluation, ramp-up, stragglers and idle allocation (wholerun.py).
    result = estimate(LLAMA3_405B)
    run = result["whole_run"]
    steady = run["steady_state_days"]
    interrupted = steady + sum(
        run["parts_days"][k] for k in ("checkpoint_writes", "failures_and_restarts")
    )
    assert 0.9 < steady / interrupted < 1.0
    assert_allclose(steady / interrupted, g.goodput(result["parameters"], 16384).goodput, 1e-12)
    assert 0 < result["goodput"] < steady / interrupted
    assert_allclose(result["goodput"], steady / result["training_days"], rtol=1e-12)
    assert_allclose(result["goodput_details"]["interruptions_per_day"] * 54, 466, rtol=1e-9)


def test_young_interval_square_root_law() -> None:
    assert_allclose(g.young_interval(10.0, 3600.0), math.sqrt(2 * 10 * 3600), rtol=1e-12)


def test_expected_segment_time_without_failures_is_work_plus_checkpoint() -> None:
    # As M grows, M e^(R/M) (e^((tau + delta)/M) - 1) tends to tau + delta.
    assert_allclose(g.expected_segment_time(100.0, 5.0, 600.0, 1e12), 105.0, rtol=1e-6)


def test_goodput_falls_with_scale() -> None:
    values = [g.goodput(70e9, n).goodput for n in (64, 1024, 16384, 131072)]
    assert values == sorted(values, reverse=True)
    assert values[-1] > 0
