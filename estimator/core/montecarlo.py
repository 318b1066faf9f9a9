"""Uncertainty of one scenario: P10/P50/P90 of training days and GPU-hours by Monte Carlo.

:func:`estimate` gives one number per scenario, with the documented margins and the mean
failure rate. :func:`monte_carlo` runs that estimate once (the layout search too, for
``parallelism: "auto"``) and then re-evaluates the last, cheap stage of the model for many
samples of the inputs nobody knows exactly:

* the two margins of the step time, ``framework_overhead`` and ``network_jitter``, uniform
  around the scenario's own values (+-:data:`MARGIN_SPREAD`, never below 0), so the margins
  a user sets move the percentiles as they move the deterministic figure;
* the achieved efficiency, a lognormal factor (median 1) on the step time whose spread is
  the estimator's out-of-sample error on the accelerator's family: leave-one-source-out
  over published runs (``docs/accuracy.md``), wider for a family with few or no
  measurements (:func:`~estimator.core.calibration.family_sigma`);
* the interruption rate, a lognormal multiplier on the single Llama 3 data point that
  :mod:`estimator.core.goodput` rests on, and the restart time (uniform);
* the cluster's utilisation, the share of wall clock the job actually runs (uniform).

The layout, the per-layout compute and communication times and the tokens per step are
held at the baseline's values; only the margins, efficiency and schedule terms vary.
Sampling is vectorised over ``numpy.random.default_rng(seed)``, so one seed gives the same
figures bit for bit.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from estimator.core import finetune, schema
from estimator.core._types import FloatArray
from estimator.core.calibration import family_sigma
from estimator.core.constants import HOURS_PER_DAY, SECONDS_PER_DAY
from estimator.core.deadline import days_quantiles
from estimator.core.errors import ScenarioError
from estimator.core.estimate import estimate
from estimator.core.frameworks import POOLED_STACK
from estimator.core.goodput import FAILURES_PER_DEVICE_HOUR
from estimator.core.scenario import Margins, Scenario
from estimator.core.validation import validate_scenario
from estimator.core.wholerun import WHOLE_RUN_SIGMA, whole_run
from estimator.core.workload import node_size_of

#: Half-width of the uniform range each margin is sampled in, around the scenario's value:
#: frameworks of one generation differ by about this much in overhead. [1]
MARGIN_SPREAD = 0.05
#: Samples whose whole-run factor is evaluated between two progress reports (when a
#: ``progress`` callback follows them; otherwise all samples at once).
PROGRESS_CHUNK = 1000
#: Spread of the efficiency factor when the scenario carries a measured speed: the run to
#: come differs from the short one profiled (data, stragglers, a later software stack). [1]
MEASURED_EFFICIENCY_SIGMA = 0.05
#: Most samples in one run (a few seconds and ~0.5 GB at the top; 4,000 is plenty for P90).
MAX_SAMPLES = 2_000_000

Range = tuple[float, float]


def _margin_limits(name: str) -> tuple[float, float]:
    """The bounds of ``margins.<name>`` in the scenario schema."""
    margin = schema.key(f"margins.{name}")
    return float(margin.minimum or 0.0), float(margin.maximum or math.inf)


#: Accepted (low, high) bounds of each uniform range: the margins' as the schema has them.
_RANGE_LIMITS: dict[str, tuple[float, float]] = {
    "framework_overhead": _margin_limits("framework_overhead"),
    "network_jitter": _margin_limits("network_jitter"),
    "restart_s": (0.0, SECONDS_PER_DAY),
    "utilisation": (0.0, 1.0),
}
_SIGMA_LIMITS: dict[str, float] = {
    "efficiency_sigma": 1.0,
    "failure_rate_sigma": 2.0,
    "whole_run_sigma": 1.0,
}


@dataclass(frozen=True)
class Uncertainty:
    """Distributions of the uncertain inputs; invalid values raise :class:`ScenarioError`.

    Parameters
    ----------
    framework_overhead : (float, float), optional
        Uniform range of the fraction added to the step time; None (default) samples the
        scenario's own ``margins.framework_overhead`` +- :data:`MARGIN_SPREAD`. [1]
    network_jitter : (float, float), optional
        Uniform range of the fraction the network adds to the whole margin-free step, not
        to communication alone, times the cluster's jitter scale
        (:func:`~estimator.core.workload.network_jitter_scale`: 0 in one node, 1 at 1,024
        devices, at most 2); None (default) samples the scenario's
        ``margins.network_jitter`` +- :data:`MARGIN_SPREAD`. [1]
    efficiency_sigma : float, optional
        Log-sd of the achieved-efficiency factor (lognormal, median 1) that divides the
        throughput; None (default) takes the family's out-of-sample error
        (:func:`~estimator.core.calibration.family_sigma`). [1]
    failure_rate_sigma : float
        Log-sd of the multiplier (lognormal, median 1) on the interruption rate
        :data:`~estimator.core.goodput.FAILURES_PER_DEVICE_HOUR`, one cluster's published rate. [1]
    restart_s : (float, float)
        Uniform range of the time from an interruption to training again. [s]
    utilisation : (float, float)
        Uniform range of the share of wall clock the job runs (queueing, maintenance
        windows); 0 < low, high <= 1. The default (1, 1) leaves the schedule alone. [1]
    whole_run_sigma : float
        Log-sd of a lognormal factor (median 1) on the whole-run wall clock: how far
        published whole runs scatter around the whole-run model beyond what the efficiency
        spread explains (:data:`~estimator.core.wholerun.WHOLE_RUN_SIGMA`, fitted). [1]
    """

    framework_overhead: Range | None = None
    network_jitter: Range | None = None
    efficiency_sigma: float | None = None
    failure_rate_sigma: float = 0.8
    restart_s: Range = (300.0, 1200.0)
    utilisation: Range = (1.0, 1.0)
    whole_run_sigma: float = WHOLE_RUN_SIGMA

    def __post_init__(self) -> None:
        for name, (lowest, highest) in _RANGE_LIMITS.items():
            if getattr(self, name) is not None:
                value = _checked_range(name, getattr(self, name), lowest, highest)
                object.__setattr__(self, name, value)
        for name, highest in _SIGMA_LIMITS.items():
            # Only efficiency_sigma has a default to resolve (the family's); None elsewhere
            # is a bad value.
            if getattr(self, name) is not None or name != "efficiency_sigma":
                object.__setattr__(self, name, _checked_sigma(name, getattr(self, name), highest))

    def resolved(self, margins: Margins, family: str, stack: str = POOLED_STACK) -> Uncertainty:
        """These distributions with every default filled in for one scenario: margins
        around its own values, the efficiency spread of its accelerator family and stack.

        Parameters
        ----------
        margins : Margins
            The scenario's margins, the centre of the default margin ranges.
        family : str
            The accelerator family, whose out-of-sample spread is the default
            ``efficiency_sigma`` (:func:`~estimator.core.calibration.family_sigma`).
        stack : str, optional
            The software stack assumed: the pooled stack adds the between-stack spread.

        Returns
        -------
        Uncertainty
            The same distributions with no None left.
        """

        def around(value: float) -> Range:
            return max(0.0, value - MARGIN_SPREAD), value + MARGIN_SPREAD

        return Uncertainty(
            framework_overhead=self.framework_overhead or around(margins.framework_overhead),
            network_jitter=self.network_jitter or around(margins.network_jitter),
            efficiency_sigma=(
                family_sigma(family, stack)
                if self.efficiency_sigma is None
                else self.efficiency_sigma
            ),
            failure_rate_sigma=self.failure_rate_sigma,
            restart_s=self.restart_s,
            utilisation=self.utilisation,
            whole_run_sigma=self.whole_run_sigma,
        )

    def as_dict(self) -> dict[str, Any]:
        """The distributions, JSON-serialisable (ranges as ``[low, high]`` lists).

        Returns
        -------
        dict
            One entry per field.
        """
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Uncertainty:
        """Build from :meth:`as_dict`'s shape; missing keys take the defaults.

        Parameters
        ----------
        data : dict
            Some or all of the fields, ranges as ``[low, high]`` pairs.

        Returns
        -------
        Uncertainty

        Raises
        ------
        ScenarioError
            For an unknown key or a bad value, naming ``uncertainty.<field>``.
        """
        if not isinstance(data, Mapping):
            raise ScenarioError("uncertainty", f"must be an object, got {data!r}")
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            raise ScenarioError(f"uncertainty.{unknown[0]}", "unknown key")
        return cls(**dict(data))


def _number(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ScenarioError(key, f"must be a finite number, got {value!r}")
    return float(value)


def _checked_range(name: str, value: Any, lowest: float, highest: float) -> Range:
    key = f"uncertainty.{name}"
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise ScenarioError(key, f"must be a [low, high] pair, got {value!r}")
    pair = tuple(value)
    if len(pair) != 2:
        raise ScenarioError(key, f"must be a [low, high] pair, got {value!r}")
    low, high = _number(key, pair[0]), _number(key, pair[1])
    if low > high:
        raise ScenarioError(key, f"low must not exceed high, got [{low:g}, {high:g}]")
    strict_low = name == "utilisation"  # a job that never runs never finishes
    if low < lowest or (strict_low and low == lowest) or high > highest:
        bound = "(" if strict_low else "["
        raise ScenarioError(
            key, f"must lie in {bound}{lowest:g}, {highest:g}], got [{low:g}, {high:g}]"
        )
    return low, high


def _checked_sigma(name: str, value: Any, highest: float) -> float:
    key = f"uncertainty.{name}"
    sigma = _number(key, value)
    if not 0.0 <= sigma <= highest:
        raise ScenarioError(key, f"must lie in [0, {highest:g}], got {sigma:g}")
    return sigma


def percentiles(values: npt.ArrayLike) -> dict[str, float]:
    """P10, P50, P90 (numpy's default linear interpolation) and mean of ``values``.

    Parameters
    ----------
    values : array_like
        The samples.

    Returns
    -------
    dict
        ``p10``, ``p50``, ``p90`` and ``mean``, as floats, in the unit of ``values``.
    """
    data = np.asarray(values, dtype=np.float64)
    p10, p50, p90 = np.percentile(data, [10.0, 50.0, 90.0])
    return {"p10": float(p10), "p50": float(p50), "p90": float(p90), "mean": float(data.mean())}


def split_step_time(result: Mapping[str, Any], margins: Margins) -> tuple[float, float]:
    """Split an estimate's step time into its margin-free part and the jitter scale.

    :func:`~estimator.core.layout.evaluate_layouts` builds step = core (1 + o f + j s), with
    o = framework_overhead, f the stack's share of it (:func:`overhead_scale`),
    j = network_jitter and s the cluster's jitter scale
    (:func:`~estimator.core.workload.network_jitter_scale`), so core = step / (1 + o + j s).

    Parameters
    ----------
    result : dict
        An :func:`estimate` output (``step_time_s``, ``margins_applied``).
    margins : Margins
        The margins the estimate was made with.

    Returns
    -------
    core_s : float
        Step time without margins. [s]
    jitter_scale : float
        s, the share of ``network_jitter`` this cluster pays. [1]
    """
    applied = result["margins_applied"]
    scale = float(applied["network_jitter_scale"])
    overhead = margins.framework_overhead * overhead_scale(result)
    factor = 1.0 + overhead + margins.network_jitter * scale
    return float(result["step_time_s"]) / factor, scale


def overhead_scale(result: Mapping[str, Any]) -> float:
    """The share of the framework-overhead margin an estimate's stack pays
    (``margins_applied.framework_overhead_scale``; 1 in estimates that predate it). [1]"""
    return float(result["margins_applied"].get("framework_overhead_scale", 1.0))


def step_time(
    core_s: float,
    jitter_scale: float,
    framework_overhead: FloatArray,
    network_jitter: FloatArray,
) -> FloatArray:
    """Step time with the given margins, core (1 + o + j s) (see :func:`split_step_time`).

    Parameters
    ----------
    core_s : float
        Step time without margins. [s]
    jitter_scale : float
        s, the share of ``network_jitter`` the cluster pays. [1]
    framework_overhead : numeric
        o, the fraction added to the step time. [1]
    network_jitter : numeric
        j, the fraction added to the whole step (not to communication alone), paid times
        the cluster's ``jitter_scale``. [1]

    Returns
    -------
    numeric
        Step time. [s]
    """
    return core_s * (1.0 + framework_overhead + network_jitter * jitter_scale)


def _draw(
    rng: np.random.Generator, uncertainty: Uncertainty, samples: int
) -> dict[str, FloatArray]:
    # Fixed order, every variable drawn even when its range is collapsed: a seed's stream
    # does not depend on which inputs are uncertain. ``uncertainty`` is resolved (no None).
    assert uncertainty.framework_overhead is not None
    assert uncertainty.network_jitter is not None
    assert uncertainty.efficiency_sigma is not None

    def lognormal(sigma: float) -> FloatArray:
        return np.exp(sigma * rng.standard_normal(samples))

    return {
        "framework_overhead": rng.uniform(*uncertainty.framework_overhead, samples),
        "network_jitter": rng.uniform(*uncertainty.network_jitter, samples),
        "efficiency": lognormal(uncertainty.efficiency_sigma),
        "failure_rate": FAILURES_PER_DEVICE_HOUR * lognormal(uncertainty.failure_rate_sigma),
        "restart_s": rng.uniform(*uncertainty.restart_s, samples),
        "utilisation": rng.uniform(*uncertainty.utilisation, samples),
        "whole_run": lognormal(uncertainty.whole_run_sigma),
    }


def whole_run_factor(
    scenario: Scenario,
    steady_s: FloatArray,
    parameters: float,
    failure_rate: FloatArray,
    restart_s: FloatArray,
) -> FloatArray:
    """Whole-run over steady-state wall clock of each sample, through
    :func:`~estimator.core.wholerun.whole_run` itself, evaluated on the sample arrays at once.

    ``whole_run`` is elementwise arithmetic over :mod:`estimator.core.goodput`'s formulas,
    which take numpy arrays, so one call gives every sample the figure a call per sample
    would (its annotations name the scalar case, hence the casts).

    Parameters
    ----------
    scenario : Scenario
        The validated scenario (cluster size, node size, ``run`` settings).
    steady_s : array
        Steady-state wall clock of each sample. [s]
    parameters : float
        Parameters saved in a checkpoint. [parameters]
    failure_rate : array
        Interruptions per device-hour of each sample. [1/h]
    restart_s : array
        Time from an interruption to training again of each sample. [s]

    Returns
    -------
    array
        Whole-run / steady-state wall clock of each sample (>= 1). [1]
    """
    run = whole_run(
        cast(float, steady_s),
        parameters,
        scenario.cluster.num_gpus,
        node_size_of(scenario),
        scenario.run,
        failure_rate=cast(float, failure_rate),
        restart_s=cast(float, restart_s),
    )
    return np.asarray(run.training_days * SECONDS_PER_DAY / steady_s, dtype=np.float64)


def _whole_run_factor_samples(
    valid: Scenario,
    steady_s: FloatArray,
    parameters: float,
    draws: Mapping[str, FloatArray],
    progress: Callable[[float], None] | None,
) -> FloatArray:
    """:func:`whole_run_factor` of every sample (in chunks of :data:`PROGRESS_CHUNK` when
    someone follows the progress) times the lognormal spread of published whole runs
    around the model."""
    count = len(steady_s)
    step = max(count, 1) if progress is None else PROGRESS_CHUNK
    out = np.empty(count)
    for start in range(0, count, step):
        part = slice(start, min(start + step, count))
        out[part] = whole_run_factor(
            valid,
            steady_s[part],
            parameters,
            draws["failure_rate"][part],
            draws["restart_s"][part],
        )
        if progress is not None:
            progress(part.stop / count)
    return out * draws["whole_run"]


def _margin_warnings(margins: Margins, uncertainty: Uncertainty) -> list[str]:
    notes = []
    for name in ("framework_overhead", "network_jitter"):
        if getattr(uncertainty, name) is None:
            continue
        value, (low, high) = getattr(margins, name), getattr(uncertainty, name)
        if not low <= value <= high:
            notes.append(
                f"margins.{name} = {value:g} lies outside the sampled range "
                f"[{low:g}, {high:g}]; the samples use the range"
            )
    return notes


def _count(key: str, value: Any, lowest: int, highest: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ScenarioError(key, f"must be an integer, got {value!r}")
    count = int(value)
    if count < lowest or (highest is not None and count > highest):
        limit = "" if highest is None else f", {highest}"
        raise ScenarioError(key, f"must lie in [{lowest}{limit}], got {count}")
    return count


def monte_carlo(
    scenario: Mapping[str, Any] | Scenario,
    *,
    seed: int,
    samples: int = 4000,
    uncertainty: Uncertainty | None = None,
    progress: Callable[[float], None] | None = None,
    baseline: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """P10/P50/P90 of training wall clock and GPU-hours of one scenario.

    For sample i, with the baseline's step split by :func:`split_step_time`:
    step_i = (core + j_i C)(1 + o_i), tokens/s_i = tokens_per_step / (step_i k_i),
    days_i = tokens / (tokens/s_i g_i u_i) / 86,400 and gpu_hours_i = 24 days_i num_gpus,
    where k_i is the efficiency factor, g_i the goodput at the sampled interruption rate
    and restart time (Young 1974; Daly 2006, eq. 6; see :mod:`estimator.core.goodput`) and
    u_i the utilisation. GPU-hours count the devices held for the whole wall clock, as in
    :func:`estimate`.

    Parameters
    ----------
    scenario : dict or Scenario
        A scenario in the contract's format, or a validated :class:`Scenario`; ``"auto"``
        parallelism runs the layout search once and samples the layout it picks.
    seed : int
        Seed of ``numpy.random.default_rng``; non-negative.
    samples : int
        Number of samples, 1 to :data:`MAX_SAMPLES`.
    uncertainty : Uncertainty, optional
        The input distributions; ``Uncertainty()`` when omitted.
    progress : callable, optional
        Called with the fraction of samples done (0 to 1, ending at 1.0).
    baseline : mapping, optional
        :func:`estimate` of this very scenario, when the caller already has it; saves a
        second estimate (and, for ``"auto"``, a second layout search).

    Returns
    -------
    dict
        JSON-serialisable: ``seed``, ``samples``, ``uncertainty`` (:meth:`Uncertainty.as_dict`),
        ``deterministic`` (``training_days``, ``gpu_hours`` of :func:`estimate`),
        ``training_days`` and ``gpu_hours`` (each ``p10``, ``p50``, ``p90``, ``mean``),
        ``training_days_quantiles`` (:func:`~estimator.core.deadline.days_quantiles`),
        ``parallelism`` (the layout sampled), ``warnings`` and ``estimator_version``.

    Raises
    ------
    ScenarioError
        For an invalid scenario, ``seed`` or ``samples``; ``.key`` names the field.
    """
    seed, samples = _count("seed", seed, 0), _count("samples", samples, 1, MAX_SAMPLES)
    requested = Uncertainty() if uncertainty is None else uncertainty
    valid = scenario if isinstance(scenario, Scenario) else validate_scenario(scenario)
    measured = not isinstance(scenario, Scenario) and scenario.get("measurement") is not None
    if measured and requested.efficiency_sigma is None:
        # The speed was measured: what is left unknown is how well it carries over.
        requested = dataclasses.replace(requested, efficiency_sigma=MEASURED_EFFICIENCY_SIGMA)
    resolved = requested.resolved(valid.margins, valid.cluster.spec.family, valid.stack)
    if baseline is None:  # the mapping keeps the measurement; the validated form does not
        baseline = estimate(scenario if measured else valid)
    core, jitter_scale = split_step_time(baseline, valid.margins)
    draws = _draw(np.random.default_rng(seed), resolved, samples)
    overheads = draws["framework_overhead"] * overhead_scale(baseline)
    steps = step_time(core, jitter_scale, overheads, draws["network_jitter"])
    num_gpus = valid.cluster.num_gpus
    seconds_per_token = steps * draws["efficiency"] / baseline["tokens_per_step"]
    steady = valid.training.tokens * seconds_per_token / draws["utilisation"]
    saved = finetune.checkpoint_parameters(valid.model, valid.training.method)
    factor = _whole_run_factor_samples(valid, steady, saved, draws, progress)
    days = steady * factor / SECONDS_PER_DAY
    warnings = _margin_warnings(valid.margins, requested)
    if not baseline["fits_in_memory"]:
        warnings.append("the layout does not fit in accelerator memory; it cannot run as is")
    return {
        "seed": seed,
        "samples": samples,
        "uncertainty": resolved.as_dict(),
        "deterministic": {
            "tokens_per_s_per_gpu": baseline["tokens_per_s_per_gpu"],
            "training_days": baseline["training_days"],
            "gpu_hours": baseline["gpu_hours"],
        },
        "tokens_per_s_per_gpu": percentiles(1.0 / (seconds_per_token * num_gpus)),
        "training_days": percentiles(days),
        # The days' whole distribution in 101 numbers, for the chance of meeting a deadline.
        "training_days_quantiles": days_quantiles(days),
        "gpu_hours": percentiles(days * HOURS_PER_DAY * num_gpus),
        "parallelism": baseline["parallelism"],
        "warnings": warnings,
        "estimator_version": baseline["estimator_version"],
    }


__all__ = [
    "MARGIN_SPREAD",
    "Uncertainty",
    "estimate_with_uncertainty",
    "monte_carlo",
    "overhead_scale",
    "percentiles",
    "split_step_time",
    "step_time",
    "whole_run_factor",
]


def estimate_with_uncertainty(
    scenario: Mapping[str, Any] | Scenario, *, seed: int = 1, samples: int = 4000
) -> dict[str, Any]:
    """:func:`estimate` plus the Monte Carlo's P10/P50/P90 (``estimate --uncertainty``).

    Parameters
    ----------
    scenario : dict or Scenario
        A scenario in the contract's format, or a validated :class:`Scenario`.
    seed : int
        Seed of ``numpy.random.default_rng``; non-negative.
    samples : int
        Number of samples, 1 to :data:`MAX_SAMPLES`.

    Returns
    -------
    dict
        Every key of :func:`estimate`, plus ``percentiles`` (``tokens_per_s_per_gpu``,
        ``training_days``, ``gpu_hours``, each ``p10``, ``p50``, ``p90``) and
        ``uncertainty`` (``samples``, ``seed`` and the distributions sampled); the Monte
        Carlo's own warnings are appended to ``warnings``.
    """
    valid = scenario if isinstance(scenario, Scenario) else validate_scenario(scenario)
    result = estimate(valid)
    spread = monte_carlo(valid, seed=seed, samples=samples, baseline=result)
    keys = ("tokens_per_s_per_gpu", "training_days", "gpu_hours")
    result["percentiles"] = {
        key: {p: spread[key][p] for p in ("p10", "p50", "p90")} for key in keys
    }
    result["uncertainty"] = {"samples": samples, "seed": seed, **spread["uncertainty"]}
    result["warnings"] = [*result["warnings"], *spread["warnings"]]
    return result
