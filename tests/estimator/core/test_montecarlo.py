"""monte_carlo(): reproducible percentiles that collapse onto estimate() when nothing varies."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import pytest
from numpy.testing import assert_allclose

from estimator.core import ScenarioError, estimate
from estimator.core.calibration import family_sigma
from estimator.core.estimate import stack_alternatives
from estimator.core.goodput import FAILURES_PER_DEVICE_HOUR
from estimator.core.montecarlo import (
    MARGIN_SPREAD,
    Uncertainty,
    estimate_with_uncertainty,
    monte_carlo,
    percentiles,
    split_step_time,
    step_time,
    whole_run_factor,
)
from estimator.core.scenario import Margins
from estimator.core.validation import validate_scenario
from estimator.core.wholerun import WHOLE_RUN_SIGMA, whole_run

from .scenarios import GPT3_175B, SMALL, scenario

ROOT = Path(__file__).resolve().parents[3]
#: Every input fixed at the scenario's defaults: margins 0.10 / 0.05, mean failure rate,
#: 600 s restart (goodput.RESTART_S), full utilisation, no whole-run spread.
COLLAPSED = Uncertainty(
    framework_overhead=(0.10, 0.10),
    network_jitter=(0.05, 0.05),
    efficiency_sigma=0.0,
    failure_rate_sigma=0.0,
    restart_s=(600.0, 600.0),
    utilisation=(1.0, 1.0),
    whole_run_sigma=0.0,
)
QUANTILES = ("p10", "p50", "p90", "mean")


def collapsed(**changes: Any) -> Uncertainty:
    return Uncertainty(**{**COLLAPSED.as_dict(), **changes})


def assert_all_quantiles(result: dict, days: float, gpu_hours: float, rtol: float) -> None:
    for q in QUANTILES:
        assert_allclose(result["training_days"][q], days, rtol=rtol)
        assert_allclose(result["gpu_hours"][q], gpu_hours, rtol=rtol)


def test_monte_carlo_same_seed_is_identical() -> None:
    first = monte_carlo(GPT3_175B, seed=7, samples=2000)
    assert monte_carlo(GPT3_175B, seed=7, samples=2000) == first  # bit for bit


def test_monte_carlo_other_seed_differs_but_close() -> None:
    # The days spread lognormally with log-sd sigma = sqrt(sigma_e^2 + sigma_w^2) (the
    # family's efficiency spread and the fitted whole-run spread, ~0.3). A P10/P90 of n
    # samples has a relative standard error of about 1.71 sigma / sqrt(n) (the normal
    # quantile's), and two seeds differ by sqrt(2) of that: 5 standard errors is ~2.5 % at
    # n = 20,000, still far below what a broken stream would change.
    n = 20_000
    u = Uncertainty().resolved(Margins(), validate_scenario(GPT3_175B).cluster.spec.family)
    assert u.efficiency_sigma is not None
    sigma = math.hypot(u.efficiency_sigma, u.whole_run_sigma)
    tolerance = 5 * math.sqrt(2) * 1.71 * sigma / math.sqrt(n)
    a = monte_carlo(GPT3_175B, seed=1, samples=n)["training_days"]
    b = monte_carlo(GPT3_175B, seed=2, samples=n)["training_days"]
    assert a != b
    for q in QUANTILES:
        assert_allclose(a[q], b[q], rtol=tolerance)


TPU_SLICE = scenario(
    SMALL,
    cluster={"accelerator": "TPU-v5p", "num_gpus": 64},
    parallelism={"tp": 4, "pp": 1, "dp": 16, "zero_stage": 3},
)


@pytest.mark.parametrize(
    "base",
    [
        SMALL,
        GPT3_175B,
        scenario(SMALL, parallelism="auto"),
        scenario(GPT3_175B, run={"capacity": "spot", "evaluation_fraction": 0.03}),
        TPU_SLICE,
    ],
    ids=["small", "gpt3", "small-auto", "gpt3-spot", "tpu-slice"],
)
def test_monte_carlo_collapsed_ranges_reproduce_estimate(base: dict) -> None:
    result = monte_carlo(base, seed=3, samples=500, uncertainty=COLLAPSED)
    expected = estimate(base)
    assert result["deterministic"] == {
        "tokens_per_s_per_gpu": expected["tokens_per_s_per_gpu"],
        "training_days": expected["training_days"],
        "gpu_hours": expected["gpu_hours"],
    }
    assert result["parallelism"] == expected["parallelism"]
    assert_all_quantiles(result, expected["training_days"], expected["gpu_hours"], rtol=1e-9)
    # With two samples P10 and P90 pin both (linear interpolation): every sample is the
    # deterministic whole run.
    for seed in range(3):
        pair = monte_carlo(base, seed=seed, samples=2, uncertainty=COLLAPSED)["training_days"]
        low = (0.9 * pair["p10"] - 0.1 * pair["p90"]) / 0.8
        high = (0.9 * pair["p90"] - 0.1 * pair["p10"]) / 0.8
        assert_allclose([low, high], expected["training_days"], rtol=1e-9)


@pytest.mark.parametrize(
    ("scenario_margins", "sampled"),
    [
        ({"framework_overhead": 0.10, "network_jitter": 0.05}, (0.13, 0.08)),
        ({"framework_overhead": 0.10, "network_jitter": 0.0}, (0.10, 0.05)),
        ({"framework_overhead": 0.0, "network_jitter": 0.0}, (0.25, 0.30)),
    ],
)
def test_monte_carlo_fixed_margins_match_estimate_with_those_margins(
    scenario_margins: dict, sampled: tuple[float, float]
) -> None:
    # Rebuilding the step at other margins must give what layout.py computes with them,
    # which checks the split into margin-free time and jittered communication.
    base = scenario(GPT3_175B, margins=scenario_margins)
    fo, nj = sampled
    u = collapsed(framework_overhead=(fo, fo), network_jitter=(nj, nj))
    result = monte_carlo(base, seed=0, samples=200, uncertainty=u)
    target = estimate(scenario(GPT3_175B, margins={"framework_overhead": fo, "network_jitter": nj}))
    assert_all_quantiles(result, target["training_days"], target["gpu_hours"], rtol=1e-9)


@pytest.mark.parametrize("base", [SMALL, GPT3_175B], ids=["16-gpus", "1024-gpus"])
def test_split_step_time_without_margins_is_the_margin_free_step(base: dict) -> None:
    # The step rebuilt with both margins at zero is what estimate gives with zero margins
    # (layout.py: step = base (1 + o + j s), s the cluster's jitter scale).
    result = estimate(base)
    core, communication = split_step_time(result, Margins())
    zero = np.zeros(1)
    rebuilt = float(step_time(core, communication, zero, zero)[0])
    plain = estimate(scenario(base, margins={"framework_overhead": 0.0, "network_jitter": 0.0}))
    assert_allclose(rebuilt, plain["step_time_s"], rtol=1e-9)
    parts = result["time_per_step_breakdown_s"]
    assert_allclose(rebuilt, result["step_time_s"] - parts["overheads"], rtol=1e-9)


def whole_run_days(base: dict, steady_scale: float = 1.0, **kwargs: float) -> float:
    """Whole-run days of ``base``'s steady state times ``steady_scale`` (wholerun.py)."""
    result = estimate(base)
    parsed = validate_scenario(base)
    steady_s = result["whole_run"]["steady_state_days"] * 86400 * steady_scale
    run = whole_run(
        steady_s, result["parameters"], parsed.cluster.num_gpus, parsed.cluster.gpus_per_node,
        parsed.run, **kwargs,
    )  # fmt: skip
    return run.training_days


def test_monte_carlo_fixed_restart_goes_through_whole_run() -> None:
    # Only the schedule changes: the whole run of the same steady state with R = 1,200 s.
    u = collapsed(restart_s=(1200.0, 1200.0))
    result = monte_carlo(GPT3_175B, seed=0, samples=200, uncertainty=u)
    days = whole_run_days(GPT3_175B, restart_s=1200.0)
    assert days > estimate(GPT3_175B)["training_days"]
    assert_all_quantiles(result, days, days * 24 * 1024, rtol=1e-9)


def test_monte_carlo_fixed_utilisation_stretches_the_steady_state() -> None:
    # The job runs 80 % of the wall clock: its steady state takes 1 / 0.8 as long, and the
    # whole run is built around that (the fixed ramp-up hours are not stretched).
    u = collapsed(utilisation=(0.8, 0.8))
    result = monte_carlo(SMALL, seed=0, samples=200, uncertainty=u)
    days = whole_run_days(SMALL, steady_scale=1 / 0.8)
    assert_all_quantiles(result, days, days * 24 * 16, 1e-9)


def test_monte_carlo_default_p50_within_analytic_bounds() -> None:
    """P50 of days lies within bounds that follow from the default ranges alone.

    days = W T(steady_0 X k / u, m lambda, R), with u = 1, T the whole run
    (wholerun.whole_run, increasing in the steady state, the interruption rate and the
    restart time) and independent factors:

    * X = step / step_0 = (1 + o + j s) / (1.10 + 0.05 s) (layout.py, s the cluster's jitter
      scale) lies in [1.05 / (1.10 + 0.05 s), (1.15 + 0.10 s) / (1.10 + 0.05 s)], o being
      sampled in 0.10 +- 0.05 and j in 0.05 +- 0.05;
    * k, the efficiency factor, lognormal with log-sd sigma_e (the family's);
    * m, the failure multiplier, lognormal with log-sd sigma_f; R in [300, 1200] s;
    * W, the whole-run spread, lognormal with log-sd sigma_w.

    For independent k, m, W and q = 0.5^(1/3): P(k <= k_q, m <= m_q, W <= W_q) = q^3 = 0.5,
    and on that event days <= W_q T(steady_0 X_max k_q, m_q lambda, 1200), so P50 lies
    below that; likewise above W_(1-q) T(steady_0 X_min k_(1-q), m_(1-q) lambda, 300).
    1 % slack covers the sampling error of a median of 4000 samples (~0.6 %).
    """
    family = validate_scenario(GPT3_175B).cluster.spec.family
    u = Uncertainty().resolved(Margins(), family)
    sigma_e = u.efficiency_sigma
    assert sigma_e is not None
    result = monte_carlo(GPT3_175B, seed=11, uncertainty=Uncertainty())
    days = result["training_days"]
    assert days["p10"] <= days["p50"] <= days["p90"]
    base = estimate(GPT3_175B)
    s = base["margins_applied"]["network_jitter_scale"]
    z = NormalDist().inv_cdf(0.5 ** (1 / 3))

    def bound(sign: float, margins: float, restart: float) -> float:
        steady = margins * math.exp(sign * z * sigma_e)
        rate = FAILURES_PER_DEVICE_HOUR * math.exp(sign * z * u.failure_rate_sigma)
        whole = whole_run_days(GPT3_175B, steady, failure_rate=rate, restart_s=restart)
        return whole * math.exp(sign * z * u.whole_run_sigma)

    upper = bound(1.0, (1.15 + 0.10 * s) / (1.10 + 0.05 * s), 1200.0)
    lower = bound(-1.0, 1.05 / (1.10 + 0.05 * s), 300.0)
    assert lower * 0.99 <= days["p50"] <= upper * 1.01
    assert_allclose(result["gpu_hours"]["p50"], days["p50"] * 24 * 1024, rtol=1e-9)


def test_monte_carlo_efficiency_spread_is_the_familys_out_of_sample_error() -> None:
    family = validate_scenario(SMALL).cluster.spec.family
    sigma = family_sigma(family)
    assert Uncertainty().resolved(Margins(), family).efficiency_sigma == sigma
    result = monte_carlo(SMALL, seed=5, uncertainty=collapsed(efficiency_sigma=None))
    days = result["training_days"]
    # P90 / P50 of a lognormal is exp(Phi^-1(0.9) sigma); a P90 of n samples has a relative
    # standard error of about 1.71 sigma / sqrt(n): four of them (2.6 % at sigma 0.24).
    spread = math.exp(NormalDist().inv_cdf(0.9) * sigma)
    tolerance = 4 * 1.71 * sigma / math.sqrt(4000)
    assert_allclose(days["p90"] / days["p50"], spread, rtol=tolerance)
    assert_allclose(days["p50"], estimate(SMALL)["training_days"], rtol=tolerance)
    speed = result["tokens_per_s_per_gpu"]
    assert_allclose(speed["p50"] / speed["p10"], spread, rtol=tolerance)


@pytest.mark.parametrize(
    ("field", "narrow", "wide"),
    [
        ("framework_overhead", (0.10, 0.15), (0.10, 0.30)),
        ("network_jitter", (0.05, 0.10), (0.05, 0.50)),
        ("efficiency_sigma", 0.05, 0.2),
        ("failure_rate_sigma", 0.5, 1.5),
        ("restart_s", (300.0, 1200.0), (300.0, 7200.0)),
        ("utilisation", (0.95, 1.0), (0.7, 1.0)),
        ("whole_run_sigma", 0.05, 0.2),
    ],
)
def test_monte_carlo_wider_range_wider_spread(field: str, narrow: Any, wide: Any) -> None:
    def spread(value: Any) -> float:
        result = monte_carlo(
            GPT3_175B, seed=4, samples=2000, uncertainty=collapsed(**{field: value})
        )
        return result["training_days"]["p90"] - result["training_days"]["p10"]

    assert spread(narrow) > 0.0
    assert spread(wide) > 1.2 * spread(narrow)


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({"framework_overhead": (0.15, 0.10)}, "uncertainty.framework_overhead"),
        ({"network_jitter": (-0.1, 0.1)}, "uncertainty.network_jitter"),
        ({"network_jitter": (0.05, 0.1, 0.2)}, "uncertainty.network_jitter"),
        ({"network_jitter": "0.05"}, "uncertainty.network_jitter"),
        ({"restart_s": (600.0, 1e6)}, "uncertainty.restart_s"),
        ({"restart_s": (math.nan, 600.0)}, "uncertainty.restart_s"),
        ({"utilisation": (0.0, 1.0)}, "uncertainty.utilisation"),
        ({"utilisation": (0.9, 1.1)}, "uncertainty.utilisation"),
        ({"efficiency_sigma": -0.1}, "uncertainty.efficiency_sigma"),
        ({"failure_rate_sigma": 3.0}, "uncertainty.failure_rate_sigma"),
        ({"failure_rate_sigma": True}, "uncertainty.failure_rate_sigma"),
        ({"whole_run_sigma": -0.1}, "uncertainty.whole_run_sigma"),
        ({"whole_run_sigma": 1.5}, "uncertainty.whole_run_sigma"),
        ({"whole_run_sigma": None}, "uncertainty.whole_run_sigma"),
    ],
)
def test_uncertainty_bad_value_names_key(changes: dict, key: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        Uncertainty(**changes)
    assert caught.value.key == key
    assert caught.value.reason


def test_uncertainty_from_dict_round_trips_and_rejects_unknown_keys() -> None:
    u = Uncertainty(utilisation=[0.9, 1.0])  # type: ignore[arg-type]
    assert u.utilisation == (0.9, 1.0)
    assert Uncertainty.from_dict(json.loads(json.dumps(u.as_dict()))) == u
    assert Uncertainty.from_dict({}) == Uncertainty()
    with pytest.raises(ScenarioError) as caught:
        Uncertainty.from_dict({"jitter": [0.0, 0.1]})
    assert caught.value.key == "uncertainty.jitter"


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"seed": -1}, "seed"),
        ({"seed": 1.5}, "seed"),
        ({"seed": 0, "samples": 0}, "samples"),
        ({"seed": 0, "samples": 10**7}, "samples"),
    ],
)
def test_monte_carlo_bad_seed_or_samples_names_key(kwargs: dict, key: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        monte_carlo(SMALL, **kwargs)
    assert caught.value.key == key


def test_monte_carlo_bad_scenario_names_key() -> None:
    with pytest.raises(ScenarioError) as caught:
        monte_carlo(scenario(SMALL, model={"num_layers": -3}), seed=0)
    assert caught.value.key == "model.num_layers"


def test_monte_carlo_reports_progress_in_chunks() -> None:
    seen: list[float] = []
    monte_carlo(SMALL, seed=0, samples=2500, progress=seen.append)
    assert seen == [0.4, 0.8, 1.0]


def test_monte_carlo_output_is_json_with_documented_keys() -> None:
    result = monte_carlo(SMALL, seed=0, samples=100)
    assert set(result) == {
        "seed", "samples", "uncertainty", "deterministic", "training_days", "gpu_hours",
        "tokens_per_s_per_gpu", "parallelism", "warnings", "estimator_version",
        "training_days_quantiles",
    }  # fmt: skip
    assert set(result["training_days"]) == set(QUANTILES) == set(result["gpu_hours"])
    family = validate_scenario(SMALL).cluster.spec.family
    assert result["uncertainty"] == Uncertainty().resolved(Margins(), family).as_dict()
    assert (result["seed"], result["samples"], result["warnings"]) == (0, 100, [])
    json.dumps(result, allow_nan=False)


def test_monte_carlo_warns_when_scenario_margin_outside_a_given_range() -> None:
    base = scenario(SMALL, margins={"framework_overhead": 0.3})
    assert monte_carlo(base, seed=0, samples=10)["warnings"] == []
    u = Uncertainty(framework_overhead=(0.10, 0.15))
    warnings = monte_carlo(base, seed=0, samples=10, uncertainty=u)["warnings"]
    assert len(warnings) == 1
    assert "margins.framework_overhead" in warnings[0]


@pytest.mark.parametrize(
    "margins",
    [
        {"framework_overhead": 0.10, "network_jitter": 0.05},
        {"framework_overhead": 0.30, "network_jitter": 0.20},
        {"framework_overhead": 0.0, "network_jitter": 0.0},
        {"framework_overhead": 0.02, "network_jitter": 0.5},
    ],
)
@pytest.mark.parametrize("base", [SMALL, GPT3_175B])
def test_monte_carlo_samples_around_the_scenarios_own_margins(base: dict, margins: dict) -> None:
    """The default samples centre on the scenario's margins: P50 stays within the
    margin spread of the deterministic figure and P90 never falls below it."""
    data = scenario(base, margins=margins)
    result = monte_carlo(data, seed=3, samples=2000)
    deterministic = estimate(data)["training_days"]
    days = result["training_days"]
    assert days["p90"] >= deterministic
    assert days["p10"] <= deterministic
    overhead = 1.0 + margins["framework_overhead"]
    assert abs(days["p50"] / deterministic - 1.0) <= MARGIN_SPREAD / overhead + 0.03
    low, high = result["uncertainty"]["framework_overhead"]
    assert (low, high) == (
        max(0.0, margins["framework_overhead"] - MARGIN_SPREAD),
        margins["framework_overhead"] + MARGIN_SPREAD,
    )


def test_monte_carlo_larger_margins_move_every_percentile() -> None:
    small = monte_carlo(GPT3_175B, seed=2, samples=2000)
    large = monte_carlo(
        scenario(GPT3_175B, margins={"framework_overhead": 0.30, "network_jitter": 0.20}),
        seed=2,
        samples=2000,
    )
    for q in ("p10", "p50", "p90"):
        assert large["training_days"][q] > 1.15 * small["training_days"][q]


def test_estimate_with_uncertainty_follows_the_contract() -> None:
    result = estimate_with_uncertainty(SMALL, seed=1, samples=500)
    base = estimate(SMALL)
    assert {k: v for k, v in result.items() if k not in ("percentiles", "uncertainty")} == base
    assert set(result["percentiles"]) == {"tokens_per_s_per_gpu", "training_days", "gpu_hours"}
    for figure, bands in result["percentiles"].items():
        assert set(bands) == {"p10", "p50", "p90"}
        assert bands["p10"] <= base[figure] <= bands["p90"]
    assert (result["uncertainty"]["samples"], result["uncertainty"]["seed"]) == (500, 1)


def test_cli_estimate_uncertainty_prints_percentiles(tmp_path: Path) -> None:
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(SMALL), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "estimator", "estimate", "--uncertainty", str(path)],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    printed = json.loads(done.stdout)
    # The command line adds what the stack assumption does to the number.
    expected = estimate_with_uncertainty(SMALL)
    expected["software_stack"] = stack_alternatives(SMALL, expected)
    assert printed == json.loads(json.dumps(expected))


def test_percentiles_match_numpy() -> None:
    values = np.arange(1.0, 102.0)
    assert percentiles(values) == {"p10": 11.0, "p50": 51.0, "p90": 91.0, "mean": 51.0}


def test_montecarlo_imports_without_django() -> None:
    probe = (
        "import sys\n"
        "for name in ('django', 'celery', 'rest_framework', 'lib', 'organisations',\n"
        "             'pricing', 'planner', 'trainplan'):\n"
        "    sys.modules[name] = None\n"
        "import estimator.core.montecarlo\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


def test_monte_carlo_with_the_callers_baseline_matches_its_own() -> None:
    auto = {**SMALL, "parallelism": "auto"}
    own = monte_carlo(auto, seed=4, samples=500)
    given = monte_carlo(auto, seed=4, samples=500, baseline=estimate(auto))
    assert given == own


def test_uncertainty_whole_run_sigma_defaults_to_the_fitted_spread() -> None:
    assert Uncertainty().whole_run_sigma == WHOLE_RUN_SIGMA
    family = validate_scenario(SMALL).cluster.spec.family
    assert Uncertainty().resolved(Margins(), family).whole_run_sigma == WHOLE_RUN_SIGMA


def test_monte_carlo_whole_run_spread_is_lognormal() -> None:
    # Only W varies: P90 / P50 of days is exp(Phi^-1(0.9) sigma_w); sampling error ~1 %.
    sigma = 0.2
    result = monte_carlo(SMALL, seed=6, uncertainty=collapsed(whole_run_sigma=sigma))
    days = result["training_days"]
    assert_allclose(days["p90"] / days["p50"], math.exp(NormalDist().inv_cdf(0.9) * sigma), 0.02)
    assert_allclose(days["p50"], estimate(SMALL)["training_days"], rtol=0.02)
    speed = result["tokens_per_s_per_gpu"]  # the step is untouched
    assert speed["p10"] == speed["p90"]


@pytest.mark.parametrize("capacity", ["dedicated", "spot"])
def test_whole_run_factor_on_sample_arrays_is_whole_run_of_each_sample(capacity: str) -> None:
    parsed = validate_scenario(scenario(GPT3_175B, run={"capacity": capacity}))
    rng = np.random.default_rng(2)
    steady = rng.uniform(1e5, 1e8, 300)
    rate = FAILURES_PER_DEVICE_HOUR * np.exp(0.5 * rng.standard_normal(300))
    restart = rng.uniform(0.0, 3600.0, 300)
    factor = whole_run_factor(parsed, steady, 175e9, rate, restart)
    one_by_one = [
        whole_run(
            float(t), 175e9, parsed.cluster.num_gpus, parsed.cluster.gpus_per_node, parsed.run,
            failure_rate=float(f), restart_s=float(r),
        ).training_days * 86400 / float(t)
        for t, f, r in zip(steady, rate, restart, strict=True)
    ]  # fmt: skip
    assert_allclose(factor, one_by_one, rtol=1e-12)


def test_monte_carlo_figures_do_not_depend_on_following_the_progress() -> None:
    quiet = monte_carlo(GPT3_175B, seed=4, samples=2500)
    followed = monte_carlo(GPT3_175B, seed=4, samples=2500, progress=lambda done: None)
    assert quiet == followed
