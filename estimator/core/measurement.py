"""Measured beats modelled: rescale an estimate to a step time the user measured.

A team that profiled a short run of the scenario writes what it saw in the optional
top-level ``measurement`` key::

    "measurement": {"step_time_s": 11.2,           // or "tokens_per_s", or "mfu"
                    "measured_on": "2026-11-20",   // optional, shown with the figures
                    "cluster": {...},              // optional: where it was measured
                    "parallelism": {...}}          // optional: the layout it ran

The model predicts the step time of the measured configuration (the scenario's own cluster
and layout unless the measurement names others); the ratio ``factor = measured / predicted``
then multiplies the model's step time. A changed copy of the scenario (a lever) carries the
ratio itself (``{"factor": ...}``), so it starts from the measured speed, moved by what the
model says the change is worth.
Throughput, MFU and HFU divide by the factor; the whole run (goodput, checkpoints, failures)
is recomputed on the rescaled steady state. The estimate says so in ``calibration``.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from estimator.core.errors import ScenarioError

#: What a measurement may state, exactly one of them. ``factor`` is a calibration already
#: made (measured / predicted step time): what a changed copy of a measured scenario carries.
KINDS = ("step_time_s", "tokens_per_s", "mfu", "factor")
#: A measurement this far from the model's prediction is more likely a unit slip (ms for s,
#: tokens per GPU for the cluster's) than a slow run: refused, naming the key.
MOST_OFF = 10.0
ALLOWED = frozenset({*KINDS, "measured_on", "cluster", "parallelism"})


@dataclass(frozen=True)
class Measurement:
    kind: str
    value: float
    measured_on: str | None = None
    cluster: Mapping[str, Any] | None = None
    parallelism: Mapping[str, Any] | None = None


def measurement_parse(data: Any) -> Measurement | None:
    """The scenario's ``measurement`` (None when absent); ScenarioError naming the key."""
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise ScenarioError("measurement", 'must be an object such as {"step_time_s": 11.2}')
    unknown = sorted(set(data) - ALLOWED)
    if unknown:
        raise ScenarioError(
            f"measurement.{unknown[0]}", f"unknown key, expected one of {sorted(ALLOWED)}"
        )
    stated = [kind for kind in KINDS if kind in data]
    if len(stated) != 1:
        raise ScenarioError("measurement", f"needs exactly one of {', '.join(KINDS)}")
    kind = stated[0]
    value = data[kind]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ScenarioError(f"measurement.{kind}", f"must be a number, got {value!r}")
    if value <= 0 or (kind == "mfu" and value > 1):
        limit = "between 0 and 1" if kind == "mfu" else "more than 0"
        raise ScenarioError(f"measurement.{kind}", f"must be {limit}, got {value!r}")
    if kind == "factor" and not 1 / MOST_OFF <= value <= MOST_OFF:
        raise ScenarioError(
            "measurement.factor",
            f"must be between {1 / MOST_OFF:g} and {MOST_OFF:g}, got {value!r}",
        )
    measured_on = data.get("measured_on")
    if measured_on is not None:
        try:
            dt.date.fromisoformat(str(measured_on))
        except ValueError:
            raise ScenarioError(
                "measurement.measured_on", f"must be a date yyyy-mm-dd, got {measured_on!r}"
            ) from None
    for key in ("cluster", "parallelism"):
        if data.get(key) is not None and not isinstance(data[key], Mapping):
            raise ScenarioError(f"measurement.{key}", "must be an object as in the scenario")
    return Measurement(
        kind=kind,
        value=float(value),
        measured_on=None if measured_on is None else str(measured_on),
        cluster=data.get("cluster"),
        parallelism=data.get("parallelism"),
    )


def _without(scenario: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in scenario.items() if key != "measurement"}


def measured_step_time(measurement: Measurement, predicted: Mapping[str, Any]) -> float:
    """The measured step time at the measured configuration, whichever figure was stated. [s]"""
    if measurement.kind == "step_time_s":
        return measurement.value
    if measurement.kind == "tokens_per_s":
        return float(predicted["tokens_per_step"]) / measurement.value
    return float(predicted["step_time_s"]) * float(predicted["mfu"]) / measurement.value


def calibration_factor(scenario: Mapping[str, Any], measurement: Measurement) -> dict[str, Any]:
    """``factor = measured / predicted`` step time at the measured configuration."""
    from estimator.core.estimate import estimate

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
    from estimator.core.estimate import schedule_of

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


def measurement_pinned(scenario: Mapping[str, Any], result: Mapping[str, Any]) -> dict[str, Any]:
    """``scenario`` with its measurement replaced by the calibration ``result`` (its
    estimate) made of it: a changed copy then keeps the measured speed of the configuration
    it was measured on, moved by what the model says the change is worth."""
    calibration = result.get("calibration")
    if not isinstance(calibration, Mapping):
        return dict(scenario)
    pinned: dict[str, Any] = {"factor": calibration["factor"]}
    if calibration.get("measured_on"):
        pinned["measured_on"] = calibration["measured_on"]
    return {**scenario, "measurement": pinned}


def _on(calibration: Mapping[str, Any]) -> str:
    return f" of {calibration['measured_on']}" if calibration.get("measured_on") else ""


def measured_estimate(scenario: Mapping[str, Any], measurement: Measurement) -> dict[str, Any]:
    """:func:`~estimator.core.estimate.estimate` of a scenario with a ``measurement``."""
    from estimator.core.estimate import estimate

    calibration = calibration_factor(scenario, measurement)
    return rescaled(estimate(_without(scenario)), scenario, calibration)
