"""sensitivity(): tornado bars that equal independent re-evaluations at the range ends."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from typing import Any

import pytest
from numpy.testing import assert_allclose

from estimator.core import ScenarioError, estimate
from estimator.core.calibration import family_sigma
from estimator.core.constants import HOURS_PER_DAY, SECONDS_PER_DAY
from estimator.core.finetune import checkpoint_parameters
from estimator.core.goodput import FAILURES_PER_DEVICE_HOUR
from estimator.core.montecarlo import Uncertainty, monte_carlo
from estimator.core.sensitivity import INPUTS, sensitivity
from estimator.core.validation import validate_scenario
from estimator.core.wholerun import ALLOCATION_IDLE, START_UP_S, whole_run
from estimator.core.workload import node_size_of

from .scenarios import GPT3_175B, SMALL, scenario

PRICE = 2.5
RTOL = 1e-9
Z = 1.2815515655446004  # P90 of the standard normal
#: Ranges centred on what estimate() assumes: margins 0.10 / 0.05, a 600 s restart, full
#: utilisation; so the central case is estimate() itself, and a bar's end is estimate() of
#: the scenario with that one input moved.
ESTIMATE_CENTRED = Uncertainty(
    framework_overhead=(0.05, 0.15),
    network_jitter=(0.0, 0.10),
    restart_s=(300.0, 900.0),
    utilisation=(1.0, 1.0),
)


def bar(result: dict[str, Any], key: str) -> dict[str, Any]:
    [item] = [item for item in result["inputs"] if item["key"] == key]
    return item


def assert_bar(item: dict[str, Any], days: tuple[float, float], price: float = PRICE) -> None:
    """The bar's days are ``days`` and its costs those days' GPU-hours at ``price``."""
    gpus = GPT3_175B["cluster"]["num_gpus"]
    assert_allclose(item["training_days"], days, rtol=RTOL)
    assert_allclose(item["cost"], [d * HOURS_PER_DAY * gpus * price for d in days], rtol=RTOL)
    assert item["swing_days"] == pytest.approx(abs(days[1] - days[0]), rel=RTOL)


@pytest.fixture(scope="module")
def centred() -> dict[str, Any]:
    return sensitivity(GPT3_175B, price_per_gpu_hour=PRICE, uncertainty=ESTIMATE_CENTRED)


@pytest.fixture(scope="module")
def base_estimate() -> dict[str, Any]:
    return estimate(GPT3_175B)


def test_the_central_case_is_estimate_when_the_ranges_centre_on_its_inputs(
    centred: dict[str, Any], base_estimate: dict[str, Any]
) -> None:
    assert_allclose(centred["baseline"]["training_days"], base_estimate["training_days"], RTOL)
    assert_allclose(centred["baseline"]["gpu_hours"], base_estimate["gpu_hours"], rtol=RTOL)
    assert_allclose(centred["baseline"]["cost"], base_estimate["gpu_hours"] * PRICE, rtol=RTOL)


def test_the_central_case_is_the_monte_carlo_at_its_median_inputs() -> None:
    """Default ranges: restart 300-1200 s centres on 750 s, not estimate()'s 600 s; the
    Monte Carlo with every distribution collapsed onto its median gives the same figure."""
    spread = Uncertainty(utilisation=(0.7, 0.9))
    result = sensitivity(GPT3_175B, price_per_gpu_hour=PRICE, uncertainty=spread)
    at_medians = Uncertainty(
        framework_overhead=(0.10, 0.10),
        network_jitter=(0.05, 0.05),
        efficiency_sigma=0.0,
        failure_rate_sigma=0.0,
        restart_s=(750.0, 750.0),
        utilisation=(0.8, 0.8),
        whole_run_sigma=0.0,
    )
    mc = monte_carlo(GPT3_175B, seed=3, samples=1, uncertainty=at_medians)
    assert_allclose(result["baseline"]["training_days"], mc["training_days"]["p50"], rtol=RTOL)
    assert_allclose(result["baseline"]["cost"], mc["gpu_hours"]["p50"] * PRICE, rtol=RTOL)
    # 750 s restarts and 80 % utilisation: longer than the deterministic estimate.
    assert result["baseline"]["training_days"] > 1.2 * estimate(GPT3_175B)["training_days"]


@pytest.mark.parametrize(
    ("key", "section", "field", "ends"),
    [
        ("tokens", "training", "tokens", (270e9, 330e9)),
        ("framework_overhead", "margins", "framework_overhead", (0.05, 0.15)),
        ("network_jitter", "margins", "network_jitter", (0.0, 0.10)),
    ],
)
def test_bars_equal_estimate_with_that_one_input_moved(
    centred: dict[str, Any], key: str, section: str, field: str, ends: tuple[float, float]
) -> None:
    item = bar(centred, key)
    assert (item["low_value"], item["high_value"]) == pytest.approx(ends, rel=1e-12)
    moved = [
        estimate(scenario(GPT3_175B, **{section: {field: value}}))["training_days"]
        for value in ends
    ]
    assert_bar(item, (moved[0], moved[1]))


def _whole_run_days(steady_s: float, failure_rate: float, restart_s: float) -> float:
    """:func:`whole_run` of GPT-3 175B, one scalar call (not the Monte Carlo's arrays)."""
    valid = validate_scenario(GPT3_175B)
    saved = checkpoint_parameters(valid.model, valid.training.method)
    run = whole_run(
        steady_s,
        saved,
        valid.cluster.num_gpus,
        node_size_of(valid),
        valid.run,
        failure_rate=failure_rate,
        restart_s=restart_s,
    )
    return run.training_days


def test_schedule_bars_equal_the_whole_run_model_at_the_range_ends(
    centred: dict[str, Any], base_estimate: dict[str, Any]
) -> None:
    steady = base_estimate["whole_run"]["steady_state_days"] * SECONDS_PER_DAY
    rate = FAILURES_PER_DEVICE_HOUR

    def days(efficiency: float = 1.0, rate_factor: float = 1.0, restart: float = 600.0) -> float:
        return _whole_run_days(steady / efficiency, rate * rate_factor, restart)

    sigma = family_sigma("nvidia-ampere")
    efficiency = (math.exp(-Z * sigma), math.exp(Z * sigma))
    item = bar(centred, "efficiency")
    assert (item["low_value"], item["high_value"]) == pytest.approx(efficiency, rel=1e-12)
    assert_bar(item, (days(efficiency=efficiency[0]), days(efficiency=efficiency[1])))

    factors = (math.exp(-Z * 0.8), math.exp(Z * 0.8))  # failure_rate_sigma's default
    item = bar(centred, "failure_rate")
    assert (item["low_value"], item["high_value"]) == pytest.approx(factors, rel=1e-12)
    assert_bar(item, (days(rate_factor=factors[0]), days(rate_factor=factors[1])))

    item = bar(centred, "restart_s")
    assert (item["low_value"], item["high_value"]) == (300.0, 900.0)
    assert_bar(item, (days(restart=300.0), days(restart=900.0)))

    sigma = ESTIMATE_CENTRED.whole_run_sigma
    item = bar(centred, "whole_run")
    baseline = base_estimate["training_days"]
    assert_bar(item, (baseline * math.exp(-Z * sigma), baseline * math.exp(Z * sigma)))


def test_utilisation_bar_stretches_the_steady_state_at_the_range_ends(
    base_estimate: dict[str, Any],
) -> None:
    uncertainty = Uncertainty(
        framework_overhead=(0.05, 0.15), network_jitter=(0.0, 0.10), restart_s=(300.0, 900.0),
        utilisation=(0.6, 1.0),
    )  # fmt: skip
    result = sensitivity(GPT3_175B, price_per_gpu_hour=PRICE, uncertainty=uncertainty)
    steady = base_estimate["whole_run"]["steady_state_days"] * SECONDS_PER_DAY
    expected = [_whole_run_days(steady / u, FAILURES_PER_DEVICE_HOUR, 600.0) for u in (0.6, 1.0)]
    assert_bar(bar(result, "utilisation"), (expected[0], expected[1]))
    central = _whole_run_days(steady / 0.8, FAILURES_PER_DEVICE_HOUR, 600.0)
    assert_allclose(result["baseline"]["training_days"], central, rtol=RTOL)


@pytest.mark.parametrize("key", ["framework_overhead", "network_jitter", "restart_s"])
def test_uniform_bars_equal_the_monte_carlo_collapsed_onto_a_range_end(
    key: str,
) -> None:
    uncertainty = Uncertainty(utilisation=(0.9, 1.0))
    item = bar(sensitivity(SMALL, price_per_gpu_hour=PRICE, uncertainty=uncertainty), key)
    resolved = uncertainty.resolved(validate_scenario(SMALL).margins, "nvidia-hopper")
    centre: dict[str, Any] = {
        name: (sum(getattr(resolved, name)) / 2,) * 2
        for name in ("framework_overhead", "network_jitter", "restart_s", "utilisation")
    }
    sigmas: dict[str, Any] = {
        "efficiency_sigma": 0.0,
        "failure_rate_sigma": 0.0,
        "whole_run_sigma": 0.0,
    }
    for at, value in enumerate((item["low_value"], item["high_value"])):
        collapsed = Uncertainty(**{**centre, key: (value, value)}, **sigmas)
        mc = monte_carlo(SMALL, seed=0, samples=1, uncertainty=collapsed)
        assert_allclose(item["training_days"][at], mc["training_days"]["p50"], rtol=RTOL)
        assert_allclose(item["cost"][at], mc["gpu_hours"]["p50"] * PRICE, rtol=RTOL)


def test_bars_are_sorted_by_cost_swing_largest_first(centred: dict[str, Any]) -> None:
    swings = [item["swing_cost"] for item in centred["inputs"]]
    assert swings == sorted(swings, reverse=True)
    assert swings[0] > swings[-1]
    assert {item["key"] for item in centred["inputs"]} == {key for key, _, _ in INPUTS}
    for item in centred["inputs"]:
        assert item["swing_cost"] == pytest.approx(abs(item["cost"][1] - item["cost"][0]), RTOL)
        assert item["low_value"] <= item["central_value"] <= item["high_value"]
    # Not merely the declaration order: with a whole-run spread wider than the efficiency
    # spread, the whole-run bar (declared last) comes before the efficiency bar (first).
    wide = dataclasses.replace(ESTIMATE_CENTRED, whole_run_sigma=0.3, efficiency_sigma=0.1)
    result = sensitivity(GPT3_175B, price_per_gpu_hour=PRICE, uncertainty=wide)
    keys = [item["key"] for item in result["inputs"]]
    assert keys.index("whole_run") < keys.index("efficiency")


@pytest.mark.parametrize("share", [0.10, 0.25])
def test_the_price_bar_is_exactly_linear_and_moves_no_day(share: float) -> None:
    result = sensitivity(GPT3_175B, price_per_gpu_hour=PRICE, price_range=share)
    item, baseline = bar(result, "price"), result["baseline"]
    assert_allclose(item["cost"], [baseline["cost"] * (1 - share), baseline["cost"] * (1 + share)],
                    rtol=1e-12)  # fmt: skip
    assert item["training_days"] == [baseline["training_days"]] * 2
    assert item["swing_days"] == 0.0
    assert (item["low_value"], item["high_value"]) == pytest.approx(
        (PRICE * (1 - share), PRICE * (1 + share)), rel=1e-12
    )


def test_a_minimum_cost_floors_every_case_and_the_price_cannot_move_below_it(
    centred: dict[str, Any],
) -> None:
    # A commitment of 1.5 x the central cost: every case below it costs the commitment, so
    # the price bar (+-10 %) stays flat at it and is centred on it, not on hours x price.
    floor = 1.5 * centred["baseline"]["cost"]
    result = sensitivity(
        GPT3_175B, price_per_gpu_hour=PRICE, uncertainty=ESTIMATE_CENTRED, minimum_cost=floor
    )
    assert result["baseline"]["cost"] == floor
    assert result["minimum_cost"] == floor
    assert bar(result, "price")["cost"] == [floor, floor]
    assert bar(result, "price")["swing_cost"] == 0.0
    for item in result["inputs"]:
        free = bar(centred, item["key"])
        assert item["cost"] == [max(cost, floor) for cost in free["cost"]]
        assert item["training_days"] == free["training_days"]  # the floor moves no day
    # A floor below every case changes nothing.
    assert (
        sensitivity(
            GPT3_175B, price_per_gpu_hour=PRICE, uncertainty=ESTIMATE_CENTRED, minimum_cost=1.0
        )["inputs"]
        == centred["inputs"]
    )


def test_the_tokens_bar_scales_days_affinely_down_to_the_fixed_start_up(
    centred: dict[str, Any],
) -> None:
    item, days = bar(centred, "tokens"), centred["baseline"]["training_days"]
    low, high = item["training_days"]
    # Every whole-run part but the start-up's fixed time is a share of the steady state (the
    # idle share too, to within e^-E ~ 1e-7: the run expects over a dozen interruptions).
    assert high - days == pytest.approx(days - low, rel=1e-6)
    assert 0.08 < (high - days) / days < 0.10
    intercept = days - (days - low) / 0.10  # days extrapolated to zero tokens
    # (the extrapolation over 300 x the start-up magnifies the e^-E residue to ~3e-4)
    expected = START_UP_S / SECONDS_PER_DAY / (1 - ALLOCATION_IDLE)
    assert intercept == pytest.approx(expected, rel=1e-3)
    assert item["cost"][1] / item["cost"][0] == pytest.approx(high / low, rel=1e-12)


def test_the_efficiency_bar_widens_with_the_family_sigma() -> None:
    accelerators = ["A100-80GB-SXM", "H100-SXM", "MI300X", "L40S"]
    relative, sigmas = [], []
    for accelerator in accelerators:
        spec = scenario(SMALL, cluster={"accelerator": accelerator, "num_gpus": 16})
        result = sensitivity(spec, price_per_gpu_hour=PRICE)
        item = bar(result, "efficiency")
        sigma = family_sigma(validate_scenario(spec).cluster.spec.family)
        assert item["low_value"] == pytest.approx(math.exp(-Z * sigma), rel=1e-12)
        assert item["training_days"][0] > result["baseline"]["training_days"]
        relative.append(item["swing_days"] / result["baseline"]["training_days"])
        sigmas.append(sigma)
    assert len(set(sigmas)) == 4  # four families, four different sigmas
    # The wider the sigma, the wider the bar, wherever two sigmas differ by more than the
    # whole-run parts that do not scale with the steady state (start-up, an idle share that
    # depends on the run's length) can move a bar: 5 %.
    pairs = sorted(zip(sigmas, relative, strict=True))
    for (s1, r1), (s2, r2) in itertools.combinations(pairs, 2):
        if s2 > 1.05 * s1:
            assert r2 > r1, (s1, s2)
    flat = sensitivity(SMALL, price_per_gpu_hour=PRICE, uncertainty=Uncertainty(efficiency_sigma=0))
    assert bar(flat, "efficiency")["swing_cost"] == 0.0


def test_a_collapsed_range_gives_a_bar_of_zero_width(centred: dict[str, Any]) -> None:
    item = bar(centred, "utilisation")  # (1, 1): the default
    assert item["training_days"] == [centred["baseline"]["training_days"]] * 2
    assert item["swing_cost"] == item["swing_days"] == 0.0
    assert centred["inputs"][-1]["swing_cost"] == 0.0


def test_a_given_baseline_is_used_instead_of_a_second_estimate() -> None:
    auto = scenario(SMALL, parallelism="auto")
    result = estimate(auto)
    assert sensitivity(auto, price_per_gpu_hour=1.0, baseline=result) == sensitivity(
        auto, price_per_gpu_hour=1.0
    )
    # A baseline whose steps take twice as long (the fixed ramp-up hours do not double).
    slower = {**result, "step_time_s": 2 * result["step_time_s"]}
    doubled = sensitivity(auto, price_per_gpu_hour=1.0, baseline=slower)["baseline"]["cost"]
    single = sensitivity(auto, price_per_gpu_hour=1.0, baseline=result)["baseline"]["cost"]
    assert 1.5 * single < doubled < 2 * single


def test_the_result_is_plain_json(centred: dict[str, Any]) -> None:
    text = json.dumps(centred, allow_nan=False)
    assert json.loads(text) == centred

    def floats_only(value: Any) -> None:
        if isinstance(value, dict):
            for inner in value.values():
                floats_only(inner)
        elif isinstance(value, list):
            for inner in value:
                floats_only(inner)
        else:
            assert type(value) in (str, float), value

    floats_only(centred)


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({"price_per_gpu_hour": -1.0}, "price_per_gpu_hour"),
        ({"price_per_gpu_hour": math.nan}, "price_per_gpu_hour"),
        ({"price_per_gpu_hour": "2.5"}, "price_per_gpu_hour"),
        ({"price_per_gpu_hour": True}, "price_per_gpu_hour"),
        ({"price_range": 1.0}, "price_range"),
        ({"price_range": -0.1}, "price_range"),
        ({"tokens_range": 1.5}, "tokens_range"),
        ({"tokens_range": math.inf}, "tokens_range"),
        ({"uncertainty": {"utilisation": [0.5, 1.0]}}, "uncertainty"),
        ({"minimum_cost": -1.0}, "minimum_cost"),
        ({"minimum_cost": math.nan}, "minimum_cost"),
    ],
)
def test_invalid_settings_raise_naming_the_key(changes: dict[str, Any], key: str) -> None:
    arguments: dict[str, Any] = {"price_per_gpu_hour": PRICE, **changes}
    with pytest.raises(ScenarioError) as caught:
        sensitivity(SMALL, **arguments)
    assert caught.value.key == key


def test_an_invalid_scenario_raises_naming_its_field() -> None:
    with pytest.raises(ScenarioError) as caught:
        sensitivity(scenario(SMALL, training={"tokens": -1}), price_per_gpu_hour=PRICE)
    assert caught.value.key == "training.tokens"


def test_the_tokens_range_is_a_setting() -> None:
    result = sensitivity(
        GPT3_175B, price_per_gpu_hour=PRICE, uncertainty=ESTIMATE_CENTRED, tokens_range=0.2
    )
    item = bar(result, "tokens")
    assert (item["low_value"], item["high_value"]) == pytest.approx((240e9, 360e9), rel=1e-12)
    moved = [estimate(scenario(GPT3_175B, training={"tokens": t}))["training_days"]
             for t in (240e9, 360e9)]  # fmt: skip
    assert_bar(item, (moved[0], moved[1]))
    assert result["tokens_range"] == 0.2


def test_the_ranges_are_the_monte_carlos_own_distributions() -> None:
    requested = Uncertainty(efficiency_sigma=0.3, failure_rate_sigma=0.8, restart_s=(100, 500),
                            network_jitter=(0.02, 0.2), whole_run_sigma=0.1)  # fmt: skip
    result = sensitivity(SMALL, price_per_gpu_hour=PRICE, uncertainty=requested)
    sampled = monte_carlo(SMALL, seed=0, samples=1, uncertainty=requested)["uncertainty"]
    expected = {
        "efficiency": (math.exp(-Z * 0.3), 1.0, math.exp(Z * 0.3)),
        "failure_rate": (math.exp(-Z * 0.8), 1.0, math.exp(Z * 0.8)),
        "whole_run": (math.exp(-Z * 0.1), 1.0, math.exp(Z * 0.1)),
        "restart_s": (100.0, 300.0, 500.0),
        "network_jitter": (0.02, 0.11, 0.2),
        "framework_overhead": (*sampled["framework_overhead"][:1], 0.10,
                               *sampled["framework_overhead"][1:]),
    }  # fmt: skip
    for key, (low, central, high) in expected.items():
        item = bar(result, key)
        assert (item["low_value"], item["central_value"], item["high_value"]) == pytest.approx(
            (low, central, high), rel=1e-12
        ), key


def test_a_measured_speed_narrows_the_efficiency_bar_as_in_the_monte_carlo() -> None:
    pytest.importorskip("estimator.core.measurement")
    step = estimate(GPT3_175B)["step_time_s"]
    measured = {**GPT3_175B, "measurement": {"step_time_s": 1.2 * step}}
    result = sensitivity(measured, price_per_gpu_hour=PRICE, uncertainty=ESTIMATE_CENTRED)
    mc = monte_carlo(measured, seed=0, samples=1, uncertainty=ESTIMATE_CENTRED)
    sigma = mc["uncertainty"]["efficiency_sigma"]
    assert sigma < family_sigma("nvidia-ampere")
    assert bar(result, "efficiency")["low_value"] == pytest.approx(math.exp(-Z * sigma), rel=1e-12)
    # The central case runs at the measured speed.
    slower = estimate(measured)["training_days"]
    assert_allclose(result["baseline"]["training_days"], slower, rtol=RTOL)
    assert slower > 1.1 * estimate(GPT3_175B)["training_days"]
