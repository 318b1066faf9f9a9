"""Goodput, and its failure rate against Meta's RSC-1 (Kokolis et al. 2024, arXiv:2410.21680)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from numpy.testing import assert_allclose

from estimator.core import goodput as g
from estimator.core._types import FloatArray
from estimator.core.estimate import estimate

from .scenarios import LLAMA3_405B

#: RSC-1's published r_f: 6.50 failures per 1,000 node-days (Kokolis et al. 2024). [1/day]
RSC1_FAILURES_PER_NODE_DAY = 6.50e-3
#: RSC-1's nodes are DGX A100s, 8 GPUs each (Kokolis et al. 2024, compute infrastructure).
GPUS_PER_NODE = 8


def test_failure_rate_is_rsc1_per_node_day_over_its_gpus() -> None:
    # The constant is the published figure, converted: per node-day -> per GPU-hour.
    per_node_day = g.FAILURES_PER_DEVICE_HOUR * 24 * GPUS_PER_NODE
    assert_allclose(per_node_day, RSC1_FAILURES_PER_NODE_DAY, rtol=1e-12)


@pytest.mark.parametrize(
    ("num_gpus", "published_hours", "half_last_digit"),
    [(16384, 1.8, 0.05), (131072, 0.23, 0.005)],
)
def test_mtbf_matches_rsc1_projected_job_mttf(
    num_gpus: int, published_hours: float, half_last_digit: float
) -> None:
    # Kokolis et al. project the job MTTF from RSC-1's r_f as 1.8 h at 16,384 GPUs and
    # 0.23 h at 131,072; the model must land within the rounding of the printed figure.
    mtbf_hours = g.mean_time_between_failures(num_gpus) / 3600
    assert abs(mtbf_hours - published_hours) <= half_last_digit


def test_goodput_estimate_matches_goodput_at_16384_gpus() -> None:
    # Interruptions (checkpoint writes, lost work and restarts) alone give goodput(); the
    # estimate's goodput is steady state over the whole run, which also holds evaluation,
    # ramp-up, stragglers and idle allocation (wholerun.py), so it is lower.
    result = estimate(LLAMA3_405B)
    run = result["whole_run"]
    steady = run["steady_state_days"]
    interrupted = steady + sum(
        run["parts_days"][k] for k in ("checkpoint_writes", "failures_and_restarts")
    )
    assert_allclose(steady / interrupted, g.goodput(result["parameters"], 16384).goodput, 1e-12)
    assert 0 < result["goodput"] < steady / interrupted < 1
    assert_allclose(result["goodput"], steady / result["training_days"], rtol=1e-12)
    # One interruption per 1.8 h at 16,384 GPUs (the RSC-1 projection above).
    per_day = result["goodput_details"]["interruptions_per_day"]
    assert_allclose(per_day, RSC1_FAILURES_PER_NODE_DAY * 16384 / GPUS_PER_NODE, rtol=1e-12)
    assert abs(24 / per_day - 1.8) <= 0.05


def test_young_interval_square_root_law() -> None:
    assert_allclose(g.young_interval(10.0, 3600.0), math.sqrt(2 * 10 * 3600), rtol=1e-12)


def test_expected_segment_time_without_failures_is_work_plus_checkpoint() -> None:
    # As M grows, M e^(R/M) (e^((tau + delta)/M) - 1) tends to tau + delta.
    assert_allclose(g.expected_segment_time(100.0, 5.0, 600.0, 1e12), 105.0, rtol=1e-6)


def test_goodput_falls_with_scale() -> None:
    values = [g.goodput(70e9, n).goodput for n in (64, 1024, 16384, 131072)]
    assert values == sorted(values, reverse=True)
    assert values[-1] > 0


def test_goodput_functions_return_python_floats_for_scalars() -> None:
    result = g.goodput(70e9, 1024)
    for value in (
        g.mean_time_between_failures(1024),
        g.checkpoint_write_time(70e9, 1024),
        g.young_interval(10.0, 3600.0),
        g.expected_segment_time(100.0, 5.0, 600.0, 3600.0),
        result.goodput,
        result.mtbf_s,
        result.interruptions_per_day,
    ):
        assert type(value) is float


def test_goodput_on_arrays_matches_goodput_on_each_scalar() -> None:
    rng = np.random.default_rng(11)
    parameters = rng.uniform(1e8, 1e12, 200)
    devices = rng.integers(1, 100_000, 200).astype(np.float64)
    restart = rng.uniform(0.0, 3600.0, 200)
    rate = g.FAILURES_PER_DEVICE_HOUR * np.exp(0.5 * rng.standard_normal(200))
    arrays = g.goodput(parameters, devices, restart, rate)
    for i in range(200):
        one = g.goodput(float(parameters[i]), float(devices[i]), float(restart[i]), float(rate[i]))
        for field in dataclasses.fields(g.Goodput):
            expected = getattr(one, field.name)
            assert_allclose(np.asarray(getattr(arrays, field.name))[i], expected, rtol=1e-12)


def test_goodput_formulas_on_arrays_match_each_scalar() -> None:
    rng = np.random.default_rng(5)
    work, checkpoint = rng.uniform(1.0, 1e4, 100), rng.uniform(0.1, 600.0, 100)
    restart, mtbf = rng.uniform(0.0, 3600.0, 100), rng.uniform(60.0, 1e7, 100)
    devices, rate = rng.uniform(1.0, 1e5, 100), rng.uniform(1e-7, 1e-3, 100)
    cases: list[tuple[Callable[..., Any], tuple[FloatArray, ...]]] = [
        (g.mean_time_between_failures, (devices, rate)),
        (g.checkpoint_write_time, (work * 1e8, devices)),
        (g.young_interval, (checkpoint, mtbf)),
        (g.expected_segment_time, (work, checkpoint, restart, mtbf)),
    ]
    for formula, arguments in cases:
        vectorised = np.asarray(formula(*arguments))
        one_by_one = [formula(*(float(a[i]) for a in arguments)) for i in range(100)]
        assert_allclose(vectorised, one_by_one, rtol=1e-12)


def test_goodput_broadcasts_a_scalar_against_an_array() -> None:
    sizes = np.array([64.0, 1024.0, 16384.0])
    arrays = g.goodput(70e9, sizes)
    assert_allclose(
        np.asarray(arrays.goodput),
        [float(g.goodput(70e9, float(n)).goodput) for n in sizes],
        rtol=1e-12,
    )
    assert arrays.restart_s == g.RESTART_S
