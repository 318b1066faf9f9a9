"""Measured beats modelled: a scenario with a measured speed is rescaled to it, and changed
copies keep that speed, moved by what the model says the change is worth."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from estimator.core import ScenarioError, estimate
from estimator.core.explicit import schedule_of
from estimator.core.levers import levers
from estimator.core.montecarlo import MEASURED_EFFICIENCY_SIGMA, monte_carlo
from estimator.core.presets import preset_scenario


def _scenario() -> dict[str, Any]:
    return preset_scenario("llama3-8b", accelerator="H100-SXM", num_gpus=64)


def _measured(**measurement: Any) -> dict[str, Any]:
    return {**_scenario(), "measurement": measurement}


def test_a_measured_step_time_is_the_estimates_step_time() -> None:
    plain = estimate(_scenario())
    result = estimate(_measured(step_time_s=plain["step_time_s"] * 1.25, measured_on="2026-11-20"))
    assert result["step_time_s"] == pytest.approx(plain["step_time_s"] * 1.25, rel=1e-12)
    assert result["mfu"] == pytest.approx(plain["mfu"] / 1.25, rel=1e-12)
    assert result["tokens_per_s"] == pytest.approx(plain["tokens_per_s"] / 1.25, rel=1e-12)
    parts = result["time_per_step_breakdown_s"]
    assert sum(parts[k] for k in ("compute", "recompute", "exposed_communication", "pp_bubble",
                                  "overheads") if k in parts) == pytest.approx(
        sum(plain["time_per_step_breakdown_s"][k] for k in ("compute", "recompute",
            "exposed_communication", "pp_bubble", "overheads") if k in parts) * 1.25, rel=1e-9
    )  # fmt: skip
    calibration = result["calibration"]
    assert calibration["factor"] == pytest.approx(1.25, rel=1e-12)
    assert calibration["measured_on"] == "2026-11-20"
    # The whole run is redone on the measured throughput, not scaled as a whole.
    explicit = {**_scenario(), "parallelism": plain["parallelism"]}
    assert result["training_days"] == schedule_of(explicit, result["tokens_per_s"])["training_days"]
    assert result["training_days"] > plain["training_days"]


def test_tokens_per_second_and_mfu_measurements_mean_what_they_say() -> None:
    plain = estimate(_scenario())
    by_tokens = estimate(_measured(tokens_per_s=plain["tokens_per_s"] * 0.8))
    assert by_tokens["tokens_per_s"] == pytest.approx(plain["tokens_per_s"] * 0.8, rel=1e-12)
    by_mfu = estimate(_measured(mfu=0.35))
    assert by_mfu["mfu"] == pytest.approx(0.35, rel=1e-12)


def test_a_measurement_on_another_layout_sets_the_ratio_there() -> None:
    plain = estimate(_scenario())
    other = dict(plain["parallelism"], zero_stage=3)
    there = estimate({**_scenario(), "parallelism": other})
    result = estimate(_measured(step_time_s=there["step_time_s"] * 1.1, parallelism=other))
    assert result["calibration"]["factor"] == pytest.approx(1.1, rel=1e-12)
    assert result["step_time_s"] == pytest.approx(plain["step_time_s"] * 1.1, rel=1e-12)


def test_levers_of_a_measured_scenario_keep_its_ratio() -> None:
    plain = {lever["change"]: lever for lever in levers(_scenario())["levers"]}
    step = estimate(_scenario())["step_time_s"] * 1.2
    measured = levers(_measured(step_time_s=step))
    assert measured["levers"]
    for lever in measured["levers"]:
        assert lever["scenario"]["measurement"]["factor"] == pytest.approx(1.2, rel=1e-12)
        if lever["change"] in plain:
            expected = plain[lever["change"]]["step_time_s"] * 1.2
            assert lever["step_time_s"] == pytest.approx(expected, rel=1e-9), lever["change"]
        assert lever["step_time_s"] == estimate(lever["scenario"])["step_time_s"]


def test_the_monte_carlo_narrows_the_efficiency_spread_for_a_measured_speed() -> None:
    step = estimate(_scenario())["step_time_s"]
    measured = monte_carlo(_measured(step_time_s=step), seed=1, samples=400)
    assert measured["uncertainty"]["efficiency_sigma"] == MEASURED_EFFICIENCY_SIGMA
    modelled = monte_carlo(_scenario(), seed=1, samples=400)
    assert modelled["uncertainty"]["efficiency_sigma"] > MEASURED_EFFICIENCY_SIGMA


@pytest.mark.parametrize(
    ("measurement", "key"),
    [
        ("fast", "measurement"),
        ({}, "measurement"),
        ({"step_time_s": 1.0, "mfu": 0.4}, "measurement"),
        ({"step_time_s": -1}, "measurement.step_time_s"),
        ({"step_time_s": True}, "measurement.step_time_s"),
        ({"mfu": 1.5}, "measurement.mfu"),
        ({"factor": 40}, "measurement.factor"),
        ({"step_time_s": 1.0, "when": "today"}, "measurement.when"),
        ({"step_time_s": 1.0, "measured_on": "20/11/2026"}, "measurement.measured_on"),
        ({"step_time_s": 0.001}, "measurement.step_time_s"),  # ms written as s: 1,000x off
    ],
)
def test_a_bad_measurement_is_refused_naming_the_key(measurement: Any, key: str) -> None:
    with pytest.raises(ScenarioError) as refused:
        estimate({**_scenario(), "measurement": measurement})
    assert refused.value.key == key


def test_the_command_line_applies_a_measurement(tmp_path: Any) -> None:
    path = tmp_path / "measured.json"
    path.write_text(json.dumps(_measured(mfu=0.3)))
    done = subprocess.run(
        [sys.executable, "-m", "estimator", "estimate", str(path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["mfu"] == pytest.approx(0.3, rel=1e-12)
    path.write_text(json.dumps(_measured(mfu=3)))
    bad = subprocess.run(
        [sys.executable, "-m", "estimator", "estimate", str(path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert bad.returncode == 2
    assert bad.stderr.startswith("measurement.mfu:")
