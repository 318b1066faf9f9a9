"""estimator.calibration.whole_runs: the published whole runs, and the one figure fitted
to them."""

from __future__ import annotations

import copy
import math

import pytest
from numpy.testing import assert_allclose

from estimator.calibration import whole_runs as fitting
from estimator.core import estimate, validate_scenario

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


def test_balanced_centre_weighs_each_source_once() -> None:
    # Source a: median of (0.1, 0.2, 0.9) = 0.2; b: 0.6; c: 0.4. Pairwise means (each with
    # itself too): 0.2 0.3 0.4 0.4 0.5 0.6, median 0.4 - a's three runs count as one source.
    values = {"a": [0.1, 0.2, 0.9], "b": [0.6], "c": [0.4]}
    assert_allclose(fitting.balanced_centre(values), 0.4, rtol=1e-12)


def test_balanced_centre_is_the_hodges_lehmann_centre() -> None:
    # Source medians 0, 0, 1: the median of medians would be 0; the pairwise means are
    # 0 0 0 0.5 0.5 1 (Hollander and Wolfe, section 3.2), whose median is 0.25.
    values = {"a": [0.0], "b": [0.0, -0.1, 0.1], "c": [1.0]}
    assert_allclose(fitting.balanced_centre(values), 0.25, rtol=1e-12)


def _runs_at(saturated: float, busy: dict[str, fitting.Modelled]) -> list[dict]:
    """Runs whose measured GPU-hours are the busy model at saturated idle share ``saturated``."""
    gpus = {"x": 64, "y": 1024, "z": 8}
    return [
        {
            "id": k,
            "source_group": g,
            "scenario": {"cluster": {"num_gpus": gpus[k]}},
            "measured": {"gpu_hours": busy[k].days_at(saturated) * 24 * gpus[k]},
        }
        for k, g in (("x", "a"), ("y", "a"), ("z", "b"))
    ]


def test_fit_recovers_the_saturated_share_that_generated_the_runs() -> None:
    # Runs expecting 0.3, 4 and 40 interruptions hold 0.26, 0.98 and 1.0 of the share.
    busy = {
        "x": fitting.Modelled(10.0, 0.3),
        "y": fitting.Modelled(40.0, 4.0),
        "z": fitting.Modelled(3.0, 40.0),
    }
    runs = _runs_at(0.2, busy)
    assert_allclose(fitting.fit(runs, busy), 0.2, rtol=1e-12)
    assert fitting.fit([], busy) == 0.0


def test_fit_clamps_to_its_range() -> None:
    busy = {k: fitting.Modelled(10.0, 5.0) for k in "xyz"}
    assert fitting.fit(_runs_at(0.0, busy), busy) == 0.0
    faster = [
        {**r, "measured": {"gpu_hours": r["measured"]["gpu_hours"] * 0.8}}
        for r in _runs_at(0.0, busy)
    ]
    assert fitting.fit(faster, busy) == 0.0  # runs faster than modelled: no idle
    slower = [
        {**r, "measured": {"gpu_hours": r["measured"]["gpu_hours"] * 9}}
        for r in _runs_at(0.0, busy)
    ]
    assert fitting.fit(slower, busy) == fitting.MAX_IDLE


def test_modelled_share_follows_the_expected_interruptions() -> None:
    # s (1 - e^-E): a run expecting one interruption holds 63 % of the saturated share.
    run = fitting.Modelled(10.0, 1.0)
    assert_allclose(run.share(0.3), 0.3 * (1 - math.exp(-1)), rtol=1e-12)
    assert_allclose(run.days_at(0.3), 10.0 / (1 - 0.3 * (1 - math.exp(-1))), rtol=1e-12)


def test_modelled_counts_the_interruptions_of_the_whole_run() -> None:
    scenario = fitting.load_runs()[0]["scenario"]
    run = fitting.modelled(scenario)
    out = estimate(fitting.with_idle(scenario, 0.0))
    hours = out["training_days"] * 24
    assert_allclose(run.interruptions, hours / out["goodput_details"]["mtbf_hours"], rtol=1e-12)
    # Each device fails at the rate of Kokolis et al. 2024: E = hours x devices x rate.
    rate = 3.39e-5
    devices = scenario["cluster"]["num_gpus"]
    assert_allclose(run.interruptions, hours * devices * rate, rtol=0.01)


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
