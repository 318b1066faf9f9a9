"""``estimate(scenario) -> dict``: the contract's output for one scenario.

The entry point: it validates the scenario, applies a measured speed
(:mod:`estimator.core.measurement`: the model's step time rescaled to the measured one) and
hands ``parallelism: "auto"`` to the layout search (:func:`estimator.core.search.estimate_auto`);
an explicit layout is :func:`estimator.core.explicit.estimate_scenario`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from estimator.core.calibration import calibrated_stacks, efficiency_for, stack_name
from estimator.core.errors import ScenarioError
from estimator.core.explicit import estimate_scenario, scalar, schedule_of
from estimator.core.frameworks import PERIOD_STACKS, auto_profiles
from estimator.core.layout import evaluate_layouts
from estimator.core.layout_arrays import Layouts
from estimator.core.measurement import (
    MOST_OFF,
    Measurement,
    measured_step_time,
    measurement_parse,
)
from estimator.core.scenario import ParallelismConfig, Scenario
from estimator.core.search import estimate_auto
from estimator.core.validation import price_per_gpu_hour, validate_scenario
from estimator.core.workload import build_workload


def estimate(scenario: Mapping[str, Any] | Scenario) -> dict[str, Any]:
    """Estimate time, memory and cost drivers of one training scenario.

    Parameters
    ----------
    scenario : dict or Scenario
        A scenario in the contract's format (version 1), or an already validated
        :class:`Scenario`. With ``parallelism: "auto"`` the layout search picks the fastest
        layout that fits (:func:`estimator.core.search.estimate_auto`).

    Returns
    -------
    dict
        The contract's ``estimate`` output (JSON-serialisable).

    Raises
    ------
    ScenarioError
        When a field is invalid; ``.key`` names it.
    """
    price = None
    if not isinstance(scenario, Scenario):
        measured = (
            measurement_parse(scenario.get("measurement"))
            if isinstance(scenario, Mapping)
            else None
        )
        if measured is not None:  # measured beats modelled (estimator.core.measurement)
            return measured_estimate(scenario, measured)
        price = price_per_gpu_hour(scenario)
        scenario = validate_scenario(scenario)
    if scenario.parallelism is None:
        return estimate_auto(scenario, price)
    return estimate_scenario(scenario)


def _without(scenario: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in scenario.items() if key != "measurement"}


def measured_estimate(scenario: Mapping[str, Any], measurement: Measurement) -> dict[str, Any]:
    """:func:`estimate` of a scenario with a ``measurement``."""
    calibration = calibration_factor(scenario, measurement)
    return rescaled(estimate(_without(scenario)), scenario, calibration)


def calibration_factor(scenario: Mapping[str, Any], measurement: Measurement) -> dict[str, Any]:
    """``factor = measured / predicted`` step time at the measured configuration."""
    if measurement.kind == "factor":
        return {
            "source": "measurement",
            "kind": "factor",
            "value": measurement.value,
            "measured_on": measurement.measured_on,
            "factor": measurement.value,
        }
    reference = _without(scenario)
    if measurement.cluster is not None:
        reference["cluster"] = dict(measurement.cluster)
    if measurement.parallelism is not None:
        reference["parallelism"] = dict(measurement.parallelism)
    try:
        predicted = estimate(reference)
    except ScenarioError as error:
        raise ScenarioError(f"measurement.{error.key}", error.reason) from None
    measured = measured_step_time(measurement, predicted)
    factor = measured / float(predicted["step_time_s"])
    if not 1 / MOST_OFF <= factor <= MOST_OFF:
        raise ScenarioError(
            f"measurement.{measurement.kind}",
            f"implies a step of {measured:.4g} s where the model predicts "
            f"{predicted['step_time_s']:.4g} s ({factor:.3g} times): check the units",
        )
    return {
        "source": "measurement",
        "kind": measurement.kind,
        "value": measurement.value,
        "measured_on": measurement.measured_on,
        "factor": factor,
        "measured_step_time_s": measured,
        "predicted_step_time_s": float(predicted["step_time_s"]),
        "measured_parallelism": predicted["parallelism"],
        "measured_num_gpus": int(reference["cluster"]["num_gpus"]),
    }


def rescaled(
    result: Mapping[str, Any], scenario: Mapping[str, Any], calibration: Mapping[str, Any]
) -> dict[str, Any]:
    """``result`` (the estimate of ``scenario`` without its measurement) with its step time
    multiplied by the calibration's factor and every figure that follows from it redone."""
    factor = float(calibration["factor"])
    out = dict(result)
    out["step_time_s"] = result["step_time_s"] * factor
    for key in ("tokens_per_s", "tokens_per_s_per_gpu", "tflops_per_gpu", "mfu", "hfu"):
        out[key] = result[key] / factor
    if result.get("mfu_bf16") is not None:
        out["mfu_bf16"] = result["mfu_bf16"] / factor
    out["time_per_step_breakdown_s"] = {
        part: seconds * factor for part, seconds in result["time_per_step_breakdown_s"].items()
    }
    explicit = {**_without(scenario), "parallelism": result["parallelism"]}
    out.update(schedule_of(explicit, out["tokens_per_s"]))
    out["calibration"] = dict(calibration)
    out["warnings"] = [
        *result.get("warnings", []),
        f"calibrated to your measurement{_on(calibration)}: the model's step time x {factor:.3f}",
    ]
    return out


def stack_alternatives(
    scenario: Mapping[str, Any] | Scenario, result: Mapping[str, Any]
) -> dict[str, Any]:
    """The estimate's ``software_stack`` with the same layout's speed on every calibrated
    stack: what the stack assumption does to the number.

    Kept out of :func:`estimate` (one layout evaluation per stack): the workers and the
    command line add it to what they show.

    Parameters
    ----------
    scenario : dict or Scenario
        The scenario estimated.
    result : dict
        Its :func:`estimate` output (``parallelism``, ``framework``, ``software_stack``,
        ``tokens_per_s_per_gpu``).

    Returns
    -------
    dict
        ``software_stack`` plus ``alternatives``: per calibrated stack that a framework
        running on this accelerator has (the period stacks only when assumed) its ``name``
        and ``relative_speed``, tokens/s there over tokens/s on the stack assumed [1].
    """
    valid = scenario if isinstance(scenario, Scenario) else validate_scenario(scenario)
    layout = ParallelismConfig(**result["parallelism"])
    assumed = result["software_stack"]["id"]
    valid = dataclasses.replace(
        valid, parallelism=layout, framework=result["framework"]["id"], stack=assumed
    )
    workload = build_workload(valid)
    family = workload.spec.family
    speed = float(result["tokens_per_s_per_gpu"])
    alternatives = {}
    # Only stacks a framework that runs on this accelerator has (TPUs: MaxText alone).
    spec = workload.spec
    runnable = {
        p.stack for p in auto_profiles(family, valid.training.precision, "bf16" in spec.peak_tflops)
    }
    shown = [
        s for s in calibrated_stacks() if s in runnable and (s not in PERIOD_STACKS or s == assumed)
    ]
    for stack in shown:
        other = dataclasses.replace(workload, efficiency=efficiency_for(family, stack))
        results = evaluate_layouts(other, Layouts.single(layout))
        tokens_per_s = scalar(results, "tokens_per_step") / scalar(results, "step_time")
        alternatives[stack] = {
            "name": stack_name(stack),
            "relative_speed": tokens_per_s / workload.num_gpus / speed,
        }
    return {**result["software_stack"], "alternatives": alternatives}


def _on(calibration: Mapping[str, Any]) -> str:
    return f" of {calibration['measured_on']}" if calibration.get("measured_on") else ""
