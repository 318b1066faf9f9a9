"""scripts/whole_run_fit.py: the published whole runs, and the one figure fitted to them."""

from __future__ import annotations

import copy
import math
import sys
from pathlib import Path

import pytest
from numpy.testing import assert_allclose

from estimator.core import estimate, validate_scenario

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import whole_run_fit as fitting  # noqa: E402

RUN_KEYS = {"id", "source", "source_group", "scenario", "measured", "measured_basis", "covers"}


def test_every_published_run_has_a_source_and_a_valid_scenario() -> None:
    runs = fitting.load_runs()
    assert len(runs) >= 10
    ids = [r["id"] for r in runs]
    assert len(ids) == len(set(ids))
    for run in runs:
        assert not RUN_KEYS - set(run), run["id"]
        assert len(run["source"]) > 20, run["id"]
        assert run["measured"]["gpu_hours"] > 0, run["id"]
        validate_scenario(run["scenario"])
    assert any(fitting.fitted(r) for r in runs)


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ([], True),
        (["config_assumed"], True),
        (["throughput_based"], False),
        (["config_assumed", "includes_other_phases"], False),
        (["config_assumed", "contradicted_by_publication"], False),
    ],
)
def test_only_whole_pretraining_runs_are_fitted(flags: list[str], expected: bool) -> None:
    assert fitting.fitted({"flags": flags}) is expected


@pytest.mark.parametrize("idle", [0.0, 0.05, 0.3, fitting.MAX_IDLE])
def test_idle_from_inverts_the_held_share(idle: float) -> None:
    # Wall clock held / busy = 1 / (1 - s) (wholerun: idle = held s / (1 - s)).
    assert_allclose(fitting.idle_from(-math.log(1.0 - idle)), idle, atol=1e-12)


def test_idle_from_clamps_to_its_range() -> None:
    assert fitting.idle_from(-0.5) == 0.0  # runs faster than modelled: no idle
    assert fitting.idle_from(5.0) == fitting.MAX_IDLE


def test_balanced_log_ratio_weighs_each_source_once() -> None:
    # Source a: median of (0.1, 0.2, 0.9) = 0.2; b: 0.6; c: 0.4. Pairwise means (each with
    # itself too): 0.2 0.3 0.4 0.4 0.5 0.6, median 0.4 - a's three runs count as one source.
    logs = {"a": [0.1, 0.2, 0.9], "b": [0.6], "c": [0.4]}
    assert_allclose(fitting.balanced_log_ratio(logs), 0.4, rtol=1e-12)


def test_balanced_log_ratio_is_the_hodges_lehmann_centre() -> None:
    # Source medians 0, 0, 1: the median of medians would be 0; the pairwise means are
    # 0 0 0 0.5 0.5 1 (Hollander and Wolfe, section 3.2), whose median is 0.25.
    logs = {"a": [0.0], "b": [0.0, -0.1, 0.1], "c": [1.0]}
    assert_allclose(fitting.balanced_log_ratio(logs), 0.25, rtol=1e-12)


def test_fit_recovers_the_idle_share_that_generated_the_runs() -> None:
    # Runs whose measured GPU-hours are the busy model at 20 % idle.
    busy = {"x": 10.0, "y": 40.0, "z": 3.0}
    gpus = {"x": 64, "y": 1024, "z": 8}
    runs = [
        {
            "id": k,
            "source_group": g,
            "scenario": {"cluster": {"num_gpus": gpus[k]}},
            "measured": {"gpu_hours": busy[k] / 0.8 * 24 * gpus[k]},
        }
        for k, g in (("x", "a"), ("y", "a"), ("z", "b"))
    ]
    assert_allclose(fitting.fit(runs, busy), 0.2, rtol=1e-12)
    assert fitting.fit([], busy) == 0.0


def test_with_idle_sets_the_share_and_the_whole_run_follows() -> None:
    scenario = copy.deepcopy(fitting.load_runs()[0]["scenario"])
    original = copy.deepcopy(scenario)
    busy = estimate(fitting.with_idle(scenario, 0.0))["training_days"]
    held = estimate(fitting.with_idle(scenario, 0.25))
    assert scenario == original  # the input is left alone
    assert held["training_days"] == pytest.approx(busy / 0.75, rel=1e-12)
    assert_allclose(
        held["whole_run"]["parts_days"]["allocation_idle"] / held["training_days"], 0.25
    )
