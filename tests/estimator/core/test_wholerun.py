"""Whole-run wall clock: each part against its formula, and how estimate reports it."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from numpy.testing import assert_allclose

from estimator.core import ScenarioError, estimate, validate_scenario, wholerun
from estimator.core import goodput as g
from estimator.core.scenario import RunSettings
from estimator.core.wholerun import whole_run

from .scenarios import GPT3_175B, LLAMA3_405B, SMALL, scenario

DAY = 86400.0
#: 60 days of steady-state steps of a 70 B model on 1,024 devices, 8 per node.
STEADY_S, PARAMETERS, DEVICES, NODE = 60 * DAY, 70e9, 1024, 8


def daly_overheads(
    parameters: float, devices: int, rate: float, restart_s: float
) -> tuple[float, float]:
    """(checkpoint writes, lost work + restarts) per second of work (Young 1974; Daly 2006).

    Checkpoints of delta seconds every tau = sqrt(2 delta M) seconds of work; one interval
    takes M e^(R/M) (e^((tau + delta)/M) - 1) of wall clock: delta of it writes, the rest
    beyond tau + delta is lost to interruptions.
    """
    mtbf = g.mean_time_between_failures(devices, rate)
    delta = g.checkpoint_write_time(parameters, devices)
    tau = g.young_interval(delta, mtbf)
    segment = g.expected_segment_time(tau, delta, restart_s, mtbf)
    return delta / tau, (segment - tau - delta) / tau


def parts_s(run: wholerun.WholeRun) -> dict[str, float]:
    return {k: v * DAY for k, v in run.parts_days.items()}


@pytest.fixture(scope="module")
def dedicated() -> wholerun.WholeRun:
    return whole_run(STEADY_S, PARAMETERS, DEVICES, NODE)


def test_whole_run_checkpoint_writes_and_failures_follow_young_daly(
    dedicated: wholerun.WholeRun,
) -> None:
    writes, failures = daly_overheads(PARAMETERS, DEVICES, g.FAILURES_PER_DEVICE_HOUR, g.RESTART_S)
    parts = parts_s(dedicated)
    assert_allclose(parts["checkpoint_writes"], writes * STEADY_S, rtol=1e-12)
    assert_allclose(parts["failures_and_restarts"], failures * STEADY_S, rtol=1e-12)
    # Together they are goodput.goodput's effective training time: work / (work + both).
    useful = g.goodput(PARAMETERS, DEVICES).goodput
    busy = STEADY_S + parts["checkpoint_writes"] + parts["failures_and_restarts"]
    assert_allclose(STEADY_S / busy, useful, rtol=1e-12)


def test_whole_run_reports_the_interruption_model(dedicated: wholerun.WholeRun) -> None:
    mtbf = g.mean_time_between_failures(DEVICES)
    delta = g.checkpoint_write_time(PARAMETERS, DEVICES)
    assert_allclose(dedicated.mtbf_hours, mtbf / 3600, rtol=1e-12)
    assert_allclose(dedicated.interruptions_per_day, DAY / mtbf, rtol=1e-12)
    assert_allclose(dedicated.checkpoint_write_s, delta, rtol=1e-12)
    assert_allclose(dedicated.checkpoint_interval_s, math.sqrt(2 * delta * mtbf), rtol=1e-12)
    assert dedicated.restart_s == g.RESTART_S


def test_whole_run_schedule_parts_follow_their_formulas(dedicated: wholerun.WholeRun) -> None:
    parts = parts_s(dedicated)
    assert parts["preemptions"] == 0.0  # dedicated capacity
    assert_allclose(parts["evaluation"], wholerun.EVALUATION_FRACTION * STEADY_S, rtol=1e-12)
    # One start, the same work as a restart, plus the warm-up share.
    ramp = g.RESTART_S + wholerun.RAMP_UP_FRACTION * STEADY_S
    assert_allclose(parts["ramp_up"], ramp, rtol=1e-12)
    # 128 nodes: 7 doublings beyond one node.
    stragglers = wholerun.STRAGGLER_FRACTION_PER_DOUBLING * 7 * STEADY_S
    assert_allclose(parts["stragglers"], stragglers, rtol=1e-12)
    held = STEADY_S + sum(v for k, v in parts.items() if k != "allocation_idle")
    # The idle share at the interruptions the held time expects: s (1 - e^-E).
    expected = held / g.mean_time_between_failures(DEVICES)
    idle = wholerun.ALLOCATION_IDLE * (1 - math.exp(-expected))
    assert_allclose(parts["allocation_idle"], held * idle / (1 - idle), rtol=1e-12)
    assert tuple(dedicated.parts_days) == wholerun.PARTS


def idle_share_of(run: wholerun.WholeRun) -> float:
    return run.parts_days["allocation_idle"] / run.training_days


def test_a_run_that_expects_no_interruption_holds_almost_no_idle() -> None:
    # A 350 M model for 8 hours on 32 devices expects 32 x 8 x 3.39e-5 = 0.009
    # interruptions: under 1 % of the saturated share, where a flat share charged it all.
    run = whole_run(8 * 3600.0, 350e6, 32, 8)
    expected = 8 * 32 * g.FAILURES_PER_DEVICE_HOUR
    assert expected < 0.01
    assert idle_share_of(run) < 0.01 * wholerun.ALLOCATION_IDLE
    # and its start-up is one restart's time, not hours.
    assert run.parts_days["ramp_up"] * DAY < g.RESTART_S + 0.01 * 8 * 3600


def test_a_long_run_on_many_devices_holds_the_saturated_share(
    dedicated: wholerun.WholeRun,
) -> None:
    # 60 days on 1,024 devices expect about 50 interruptions.
    assert dedicated.interruptions_per_day * 60 > 40
    assert_allclose(idle_share_of(dedicated), wholerun.ALLOCATION_IDLE, rtol=1e-6)


def test_idle_share_grows_with_run_length_and_cluster_size() -> None:
    days = [1, 3, 10, 30]
    by_length = [idle_share_of(whole_run(d * DAY, 7e9, 128, 8)) for d in days]
    by_size = [idle_share_of(whole_run(5 * DAY, 7e9, n, 8)) for n in (8, 64, 512, 4096)]
    for shares in (by_length, by_size):
        assert all(a < b for a, b in itertools.pairwise(shares))
        assert shares[0] > 0.0
        assert shares[-1] <= wholerun.ALLOCATION_IDLE


def test_idle_share_broadcasts_over_samples() -> None:
    shares = wholerun.idle_share(np.array([0.0, 1.0, 50.0]), 0.3)
    assert_allclose(shares, [0.0, 0.3 * (1 - math.exp(-1)), 0.3], rtol=1e-12)
    assert isinstance(wholerun.idle_share(2.0, 0.3), float)


def test_whole_run_days_and_goodput(dedicated: wholerun.WholeRun) -> None:
    assert_allclose(dedicated.steady_state_days, 60.0, rtol=1e-15)
    total = 60.0 + sum(dedicated.parts_days.values())
    assert_allclose(dedicated.training_days, total, rtol=1e-15)
    assert_allclose(dedicated.goodput, 60.0 / total, rtol=1e-15)


def test_whole_run_spot_adds_preemptions_at_the_reclaim_rate(
    dedicated: wholerun.WholeRun,
) -> None:
    spot = whole_run(STEADY_S, PARAMETERS, DEVICES, NODE, RunSettings(capacity="spot"))
    # Spot reclaims add SPOT_PREEMPTIONS_PER_NODE_HOUR per node to the interruption rate,
    # each interruption also waiting SPOT_REACQUIRE_S for capacity.
    nodes = DEVICES / NODE
    rate = g.FAILURES_PER_DEVICE_HOUR + wholerun.SPOT_PREEMPTIONS_PER_NODE_HOUR * nodes / DEVICES
    restart = g.RESTART_S + wholerun.SPOT_REACQUIRE_S
    with_spot = sum(daly_overheads(PARAMETERS, DEVICES, rate, restart))
    without = sum(daly_overheads(PARAMETERS, DEVICES, g.FAILURES_PER_DEVICE_HOUR, g.RESTART_S))
    parts = parts_s(spot)
    assert_allclose(parts["preemptions"], (with_spot - without) * STEADY_S, rtol=1e-9)
    assert parts["preemptions"] > 0
    assert spot.training_days > dedicated.training_days
    for name in ("checkpoint_writes", "failures_and_restarts", "evaluation", "stragglers"):
        assert spot.parts_days[name] == dedicated.parts_days[name]


@pytest.mark.parametrize("idle", [0.0, 0.05, 0.2, 0.9])
def test_whole_run_allocation_idle_is_its_share_of_the_total(idle: float) -> None:
    run = whole_run(STEADY_S, PARAMETERS, DEVICES, NODE, RunSettings(allocation_idle=idle))
    assert_allclose(run.parts_days["allocation_idle"] / run.training_days, idle, atol=1e-12)


def test_whole_run_evaluation_fraction_setting() -> None:
    run = whole_run(STEADY_S, PARAMETERS, DEVICES, NODE, RunSettings(evaluation_fraction=0.03))
    assert_allclose(run.parts_days["evaluation"], 0.03 * 60.0, rtol=1e-12)
    none = whole_run(STEADY_S, PARAMETERS, DEVICES, NODE, RunSettings(evaluation_fraction=0.0))
    assert none.parts_days["evaluation"] == 0.0


def test_whole_run_one_node_has_no_stragglers() -> None:
    for devices in (1, 4, 8):
        run = whole_run(STEADY_S, 1e9, devices, 8)
        assert run.parts_days["stragglers"] == 0.0


def test_whole_run_failure_rate_and_restart_arguments() -> None:
    rate, restart = 3 * g.FAILURES_PER_DEVICE_HOUR, 1800.0
    run = whole_run(STEADY_S, PARAMETERS, DEVICES, NODE, failure_rate=rate, restart_s=restart)
    writes, failures = daly_overheads(PARAMETERS, DEVICES, rate, restart)
    assert_allclose(run.parts_days["checkpoint_writes"], writes * 60.0, rtol=1e-12)
    assert_allclose(run.parts_days["failures_and_restarts"], failures * 60.0, rtol=1e-12)
    assert run.restart_s == restart


# How estimate reports the whole run.

WHOLE_RUN_KEYS = {
    "steady_state_days",
    "steady_state_gpu_hours",
    "parts_days",
    "parts_gpu_hours",
    "capacity",
}


@pytest.mark.parametrize(
    "data",
    [
        SMALL,
        GPT3_175B,
        LLAMA3_405B,
        scenario(GPT3_175B, run={"capacity": "spot"}),
        scenario(SMALL, run={"evaluation_fraction": 0.0, "allocation_idle": 0.3}),
    ],
    ids=["small", "gpt3", "llama3", "gpt3-spot", "small-settings"],
)
def test_estimate_whole_run_identities(data: dict) -> None:
    result = estimate(data)
    gpus = data["cluster"]["num_gpus"]
    run = result["whole_run"]
    assert set(run) == WHOLE_RUN_KEYS
    assert set(run["parts_days"]) == set(wholerun.PARTS) == set(run["parts_gpu_hours"])
    steady = data["training"]["tokens"] / result["tokens_per_s"]
    assert_allclose(run["steady_state_days"], steady / DAY, rtol=1e-12)
    total = run["steady_state_days"] + sum(run["parts_days"].values())
    assert_allclose(result["training_days"], total, rtol=1e-12)
    assert_allclose(result["gpu_hours"], result["training_days"] * 24 * gpus, rtol=1e-12)
    assert_allclose(run["steady_state_gpu_hours"], run["steady_state_days"] * 24 * gpus, 1e-12)
    for name, days in run["parts_days"].items():
        assert_allclose(run["parts_gpu_hours"][name], days * 24 * gpus, rtol=1e-12)
    assert_allclose(result["goodput"], run["steady_state_days"] / total, rtol=1e-12)
    # The old schedule identity still holds: days = tokens / (tokens/s) / goodput.
    days = data["training"]["tokens"] / result["tokens_per_s"] / result["goodput"] / DAY
    assert_allclose(result["training_days"], days, rtol=1e-12)
    assert run["capacity"] == data.get("run", {}).get("capacity", "dedicated")


@pytest.mark.parametrize(
    "run",
    [
        {},
        {"capacity": "spot"},
        {"evaluation_fraction": 0.02, "allocation_idle": 0.1},
    ],
)
def test_estimate_whole_run_is_wholerun_of_the_steady_state(run: dict) -> None:
    data = scenario(GPT3_175B, run=run)
    result = estimate(data)
    expected = whole_run(
        result["whole_run"]["steady_state_days"] * DAY,
        result["parameters"],
        1024,
        8,
        RunSettings(**run),
    )
    assert_allclose(result["training_days"], expected.training_days, rtol=1e-12)
    for name, days in expected.parts_days.items():
        assert_allclose(result["whole_run"]["parts_days"][name], days, rtol=1e-12, atol=0.0)


def test_estimate_spot_costs_more_than_dedicated() -> None:
    dedicated = estimate(GPT3_175B)
    spot = estimate(scenario(GPT3_175B, run={"capacity": "spot"}))
    assert spot["step_time_s"] == dedicated["step_time_s"]
    assert spot["training_days"] > dedicated["training_days"]
    assert spot["whole_run"]["parts_days"]["preemptions"] > 0
    assert dedicated["whole_run"]["parts_days"]["preemptions"] == 0


@pytest.mark.parametrize(
    ("run", "key"),
    [
        ({"capacity": "preemptible"}, "run.capacity"),
        ({"capacity": 1}, "run.capacity"),
        ({"evaluation_fraction": 1.5}, "run.evaluation_fraction"),
        ({"evaluation_fraction": -0.1}, "run.evaluation_fraction"),
        ({"evaluation_fraction": "1%"}, "run.evaluation_fraction"),
        ({"allocation_idle": 0.95}, "run.allocation_idle"),
        ({"allocation_idle": True}, "run.allocation_idle"),
        ({"allocation_idle": float("nan")}, "run.allocation_idle"),
        ({"restarts": 3}, "run.restarts"),
        (["spot"], "run"),
    ],
)
def test_run_settings_reject_bad_values_naming_the_key(run: object, key: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        validate_scenario(scenario(SMALL, run=run))
    assert caught.value.key == key
    assert caught.value.reason


def test_run_settings_defaults() -> None:
    assert validate_scenario(SMALL).run == RunSettings()
    parsed = validate_scenario(scenario(SMALL, run={"capacity": "spot", "allocation_idle": 0}))
    assert parsed.run == RunSettings(capacity="spot", allocation_idle=0.0)
