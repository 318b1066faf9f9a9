"""Sensitivity of one run's budget: how far each uncertain input moves days and cost.

:func:`monte_carlo` answers "how uncertain is the budget"; :func:`sensitivity` answers
"which input makes it so". It evaluates the Monte Carlo's own model (the same
:func:`~estimator.core.montecarlo.split_step_time`, :func:`~estimator.core.montecarlo.step_time`
and :func:`~estimator.core.montecarlo.whole_run_factor`) once at the *central* inputs and
then twice per input, with that one input at the low and at the high end of its range and
every other input held central: one-at-a-time ranges, drawn as a tornado chart.

Central inputs are the medians of the Monte Carlo's input distributions: the midpoint of
each uniform range (margins, restart time, utilisation) and 1 for each lognormal factor
(efficiency, interruption-rate multiplier, whole-run spread), the price and the tokens as
given. The central case is therefore exactly the Monte Carlo's model evaluated at its
median inputs. It is not :func:`estimate`'s figure (which restarts in
:data:`~estimator.core.goodput.RESTART_S` = 600 s where the default range centres on 750 s,
and runs at full utilisation) and it is not the Monte Carlo's P50 either (the median of a
nonlinear function of several inputs is not the function at their medians), but it lies
close to the P50, so a bar reads as "how far this input alone moves the budget".
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from statistics import NormalDist
from typing import Any

import numpy as np

from estimator.core import finetune
from estimator.core._types import FloatArray
from estimator.core.constants import HOURS_PER_DAY, SECONDS_PER_DAY
from estimator.core.costing import cost_of
from estimator.core.errors import ScenarioError
from estimator.core.estimate import estimate
from estimator.core.goodput import FAILURES_PER_DEVICE_HOUR
from estimator.core.montecarlo import (
    Uncertainty,
    monte_carlo,
    overhead_scale,
    split_step_time,
    step_time,
    whole_run_factor,
)
from estimator.core.scenario import Scenario
from estimator.core.validation import validate_scenario

#: z of the 90th percentile of the standard normal: a lognormal factor of log-sd sigma has
#: its P10 and P90 at exp(-+ Z_P90 sigma). [1]
Z_P90 = NormalDist().inv_cdf(0.9)
#: Default half-width of the price's range, a share of the price: list prices of one
#: accelerator move by about this much between providers and over a quarter. [1]
PRICE_RANGE = 0.10
#: Default half-width of the tokens' range, a share of the tokens: a data mix or a stopping
#: point decided during the run moves the token count by about this much. [1]
TOKENS_RANGE = 0.10

#: (key, label, unit) of each input, in the order they are evaluated (ties keep it).
INPUTS: tuple[tuple[str, str, str], ...] = (
    ("efficiency", "Achieved efficiency", "x"),
    ("price", "Price per GPU-hour", "per GPU-hour"),
    ("tokens", "Training tokens", "tokens"),
    ("failure_rate", "Interruption rate", "x"),
    ("restart_s", "Restart time", "s"),
    ("utilisation", "Cluster utilisation", "share"),
    ("framework_overhead", "Framework overhead margin", "share"),
    ("network_jitter", "Network jitter margin", "share"),
    ("whole_run", "Whole-run spread", "x"),
)


def _number(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ScenarioError(key, f"must be a finite number, got {value!r}")
    return float(value)


def _share(key: str, value: Any) -> float:
    share = _number(key, value)
    if not 0.0 <= share < 1.0:
        raise ScenarioError(key, f"must lie in [0, 1), got {share:g}")
    return share


def _midpoint(bounds: tuple[float, float] | None) -> float:
    assert bounds is not None  # a resolved Uncertainty has every range
    return 0.5 * (bounds[0] + bounds[1])


def _ranges(
    resolved: Uncertainty, price: float, tokens: float, price_range: float, tokens_range: float
) -> dict[str, tuple[float, float, float]]:
    """(low, central, high) of every input, in the units of :data:`INPUTS`."""
    assert resolved.efficiency_sigma is not None
    assert resolved.framework_overhead is not None
    assert resolved.network_jitter is not None

    def lognormal(sigma: float) -> tuple[float, float, float]:
        return math.exp(-Z_P90 * sigma), 1.0, math.exp(Z_P90 * sigma)

    def uniform(bounds: tuple[float, float]) -> tuple[float, float, float]:
        return bounds[0], _midpoint(bounds), bounds[1]

    return {
        "efficiency": lognormal(resolved.efficiency_sigma),
        "price": (price * (1.0 - price_range), price, price * (1.0 + price_range)),
        "tokens": (tokens * (1.0 - tokens_range), tokens, tokens * (1.0 + tokens_range)),
        "failure_rate": lognormal(resolved.failure_rate_sigma),
        "restart_s": uniform(resolved.restart_s),
        "utilisation": uniform(resolved.utilisation),
        "framework_overhead": uniform(resolved.framework_overhead),
        "network_jitter": uniform(resolved.network_jitter),
        "whole_run": lognormal(resolved.whole_run_sigma),
    }


def _evaluate(
    valid: Scenario, result: Mapping[str, Any], cases: Mapping[str, FloatArray]
) -> tuple[FloatArray, FloatArray]:
    """Training days and GPU-hours of each case (column arrays keyed as :data:`INPUTS`),
    term by term as :func:`~estimator.core.montecarlo.monte_carlo` evaluates a sample."""
    core, jitter_scale = split_step_time(result, valid.margins)
    overheads = cases["framework_overhead"] * overhead_scale(result)
    steps = step_time(core, jitter_scale, overheads, cases["network_jitter"])
    # The Monte Carlo's factor k slows the step; efficiency e = 1 / k.
    seconds_per_token = steps / cases["efficiency"] / result["tokens_per_step"]
    steady = cases["tokens"] * seconds_per_token / cases["utilisation"]
    saved = finetune.checkpoint_parameters(valid.model, valid.training.method)
    factor = whole_run_factor(
        valid,
        steady,
        saved,
        FAILURES_PER_DEVICE_HOUR * cases["failure_rate"],
        cases["restart_s"],
    )
    days = steady * factor * cases["whole_run"] / SECONDS_PER_DAY
    return days, days * HOURS_PER_DAY * valid.cluster.num_gpus


def sensitivity(
    scenario: Mapping[str, Any] | Scenario,
    *,
    price_per_gpu_hour: float,
    uncertainty: Uncertainty | None = None,
    baseline: Mapping[str, Any] | None = None,
    price_range: float = PRICE_RANGE,
    tokens_range: float = TOKENS_RANGE,
    minimum_cost: float = 0.0,
) -> dict[str, Any]:
    """Training days and cost with each uncertain input, alone, at the ends of its range.

    Every figure comes from the Monte Carlo's model of a sample: with the baseline's step
    split into its margin-free core and the jitter scale s (:func:`split_step_time`),

    * step = core (1 + o + j s), o and j the framework-overhead and jitter margins;
    * steady = tokens x step / (e x tokens_per_step) / u, e the achieved efficiency (the
      Monte Carlo's factor k = 1 / e) and u the utilisation;
    * days = steady x F(steady, r x rate_0, restart) x w / 86,400, F the whole-run over
      steady-state wall clock (:func:`whole_run_factor`: checkpoints, failures and
      restarts, evaluation, ramp-up, stragglers, idle allocation), rate_0 the published
      interruption rate :data:`~estimator.core.goodput.FAILURES_PER_DEVICE_HOUR`, r its
      multiplier and w the whole-run spread;
    * GPU-hours = 24 days x num_gpus and cost = max(GPU-hours x price, ``minimum_cost``) (the
      price covers every GPU for the whole wall clock, as
      :mod:`planner.scenarios.budget_figures` prices a run; a committed price is owed in
      full however short the run, so no input, the price included, moves the cost below its
      minimum spend).

    Central values are the medians of the Monte Carlo's distributions (module docstring):
    midpoints of the uniform ranges, 1 for the lognormal factors, the price and tokens as
    given. The range ends of each input are:

    * lognormal factors (efficiency e, interruption multiplier r, whole-run spread w): the
      distribution's P10 and P90, exp(-+ 1.2816 sigma) with sigma the
      ``efficiency_sigma`` (by default the family's out-of-sample error, or the narrower
      spread of a measured speed), ``failure_rate_sigma`` and ``whole_run_sigma`` as
      :func:`monte_carlo` resolves them for this scenario (it is asked, with one sample);
    * uniform ranges (o, j, restart time, u): the range's ends;
    * price and tokens, which the Monte Carlo holds fixed: the stated ranges
      price x (1 -+ ``price_range``) and tokens x (1 -+ ``tokens_range``), +-10 % by default.

    An input whose range is collapsed (the default utilisation (1, 1)) gets a bar of zero
    width. Cost is exactly proportional to days except through the price, so both swings
    rank the inputs alike apart from the price (which moves no day).

    Parameters
    ----------
    scenario : dict or Scenario
        A scenario in the contract's format, or a validated :class:`Scenario`; ``"auto"``
        parallelism runs the layout search once (unless ``baseline`` is given) and holds the
        layout it picks, as the Monte Carlo does.
    price_per_gpu_hour : float
        Price of one accelerator-hour, >= 0. [currency / GPU-hour]
    uncertainty : Uncertainty, optional
        The Monte Carlo's input distributions; ``Uncertainty()`` when omitted.
    baseline : mapping, optional
        :func:`estimate` of this very scenario, when the caller already has it.
    price_range, tokens_range : float
        Half-widths of the price's and the tokens' ranges, shares in [0, 1). [1]
    minimum_cost : float
        A commitment's minimum spend, >= 0: the least any case costs. [currency]

    Returns
    -------
    dict
        JSON-serialisable (floats, strings and lists only):

        * ``baseline``: ``training_days`` [days], ``gpu_hours`` and ``cost`` [currency] of
          the central case;
        * ``inputs``: one entry per input of :data:`INPUTS`, sorted by ``swing_cost``,
          largest first (ties keep :data:`INPUTS`' order), each with ``key``, ``label``,
          ``unit`` (``"x"`` a factor on the central value 1, ``"share"`` a fraction,
          ``"s"``, ``"tokens"``, ``"per GPU-hour"`` in the price's currency),
          ``low_value``, ``central_value`` and ``high_value`` (the input, low <= high),
          ``training_days`` and ``cost`` (each ``[at_low, at_high]``), ``swing_days`` and
          ``swing_cost`` (the absolute difference of the pair);
        * ``price_per_gpu_hour``, ``price_range``, ``tokens_range``, ``minimum_cost`` and
          ``z`` (1.2816), the settings used.

    Raises
    ------
    ScenarioError
        For an invalid scenario, ``price_per_gpu_hour``, ``price_range``, ``tokens_range``
        or ``uncertainty``; ``.key`` names the field.
    """
    price = _number("price_per_gpu_hour", price_per_gpu_hour)
    if price < 0.0:
        raise ScenarioError("price_per_gpu_hour", f"must not be negative, got {price:g}")
    price_range = _share("price_range", price_range)
    floor = _number("minimum_cost", minimum_cost)
    if floor < 0.0:
        raise ScenarioError("minimum_cost", f"must not be negative, got {floor:g}")
    tokens_range = _share("tokens_range", tokens_range)
    if uncertainty is not None and not isinstance(uncertainty, Uncertainty):
        raise ScenarioError("uncertainty", f"must be an Uncertainty, got {uncertainty!r}")
    requested = Uncertainty() if uncertainty is None else uncertainty
    valid = scenario if isinstance(scenario, Scenario) else validate_scenario(scenario)
    result = estimate(scenario) if baseline is None else baseline
    # The distributions exactly as the Monte Carlo resolves them for this scenario (margins
    # around its own, the family's efficiency spread, a narrower one for a measured speed):
    # one sample of it costs nothing next to the estimate.
    sampled = monte_carlo(scenario, seed=0, samples=1, uncertainty=requested, baseline=result)
    resolved = Uncertainty.from_dict(sampled["uncertainty"])
    ranges = _ranges(resolved, price, valid.training.tokens, price_range, tokens_range)

    # Case 0 is central; case 2i + 1 puts input i at its low end, case 2i + 2 at its high end.
    columns = {key: np.full(1 + 2 * len(INPUTS), ranges[key][1]) for key, _, _ in INPUTS}
    for index, (key, _, _) in enumerate(INPUTS):
        columns[key][2 * index + 1] = ranges[key][0]
        columns[key][2 * index + 2] = ranges[key][2]
    days, gpu_hours = _evaluate(valid, result, columns)
    cost = np.maximum(cost_of(gpu_hours, columns["price"]), floor)

    inputs: list[dict[str, Any]] = []
    for index, (key, label, unit) in enumerate(INPUTS):
        low, high = 2 * index + 1, 2 * index + 2
        inputs.append(
            {
                "key": key,
                "label": label,
                "unit": unit,
                "low_value": float(ranges[key][0]),
                "central_value": float(ranges[key][1]),
                "high_value": float(ranges[key][2]),
                "training_days": [float(days[low]), float(days[high])],
                "cost": [float(cost[low]), float(cost[high])],
                "swing_days": float(abs(days[high] - days[low])),
                "swing_cost": float(abs(cost[high] - cost[low])),
            }
        )
    inputs.sort(key=lambda item: -item["swing_cost"])
    return {
        "baseline": {
            "training_days": float(days[0]),
            "gpu_hours": float(gpu_hours[0]),
            "cost": float(cost[0]),
        },
        "inputs": inputs,
        "price_per_gpu_hour": price,
        "price_range": price_range,
        "tokens_range": tokens_range,
        "minimum_cost": floor,
        "z": Z_P90,
    }


__all__ = ["INPUTS", "PRICE_RANGE", "TOKENS_RANGE", "Z_P90", "sensitivity"]
