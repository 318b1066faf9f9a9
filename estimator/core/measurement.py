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

This module reads a measurement and states what follows from it alone; the estimate that
applies it is :func:`estimator.core.estimate.measured_estimate`, which needs the model's
prediction (and so sits above the validator, which reads the key with
:func:`measurement_parse`).
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


def measured_step_time(measurement: Measurement, predicted: Mapping[str, Any]) -> float:
    """The measured step time at the measured configuration, whichever figure was stated. [s]"""
    if measurement.kind == "step_time_s":
        return measurement.value
    if measurement.kind == "tokens_per_s":
        return float(predicted["tokens_per_step"]) / measurement.value
    return float(predicted["step_time_s"]) * float(predicted["mfu"]) / measurement.value


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
