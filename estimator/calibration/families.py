"""Fit each accelerator family's efficiency parameters to its stated-layout cases.

A family's fit minimises the stack- and source-balanced mean |ln(predicted / measured)|
of its stated-layout cases: each stack weighs the same, and each source within it,
whatever their row counts, so neither one large table nor one stack's many sources
(NVIDIA's MLPerf rounds) decide the fit alone; the absolute (not squared) error keeps
the few rows no layout-level model explains from dragging it. Nelder-Mead in log space,
from the family's prior, within the hardware's limits
(:func:`estimator.core.calibration.hardware_limit`). The fit is the pooled stack's: each
case runs at its stack's factor (:mod:`estimator.calibration.stacks`).
"""

from __future__ import annotations

import dataclasses
import math
import multiprocessing
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from estimator.calibration.loading import Prepared
from estimator.core import calibration
from estimator.core.frameworks import POOLED_STACK
from estimator.core.layout import evaluate_layouts
from estimator.core.layout_arrays import Layouts
from estimator.core.workload import build_workload

#: Fewest cases of a kind before a family fits the parameter that kind informs.
MIN_CASES_FOR_EXTRA = 8


def parameters_for(family: str, cases: Sequence[Prepared]) -> tuple[str, ...]:
    """The efficiency fields fitted for a family, given which kinds of case it has.

    gemm and attention always (fp8_gemm instead of gemm when every case is fp8, fp8_gemm as
    well when both kinds are there); with enough cases that use tensor parallelism, the
    TP overlap; for TPUs the share of elementwise traffic XLA fuses into the matmuls and
    the ICI link efficiency.
    """
    names = ["gemm", "attention"]
    fp8 = sum(c.scenario.training.precision == "fp8" for c in cases)
    if fp8 == len(cases):
        names = ["fp8_gemm", "attention"]
    elif fp8:
        names.append("fp8_gemm")
    tensor_parallel = sum(
        c.scenario.parallelism is not None and c.scenario.parallelism.tp > 1 for c in cases
    )
    if tensor_parallel >= MIN_CASES_FOR_EXTRA:
        names.append("tp_overlap")
    if family == "google-tpu":
        names += ["elementwise_fusion", "intra_node_bandwidth"]
    return tuple(names)


def predict(case: Prepared, efficiency: calibration.Efficiency, factor: float = 1.0) -> float:
    """Predicted tokens/s/GPU of a stated-layout case under ``efficiency`` (the pooled
    stack's) and its stack's ``factor`` on the kernel fractions."""
    efficiency = calibration.with_stack(
        efficiency, case.family, factor, calibration.attention_speedup(case.family, case.stack)
    )
    workload = build_workload(case.scenario, efficiency)
    layout = case.scenario.parallelism
    assert layout is not None
    result = evaluate_layouts(workload, Layouts.single(layout))
    return float(result.tokens_per_step[0] / result.step_time[0] / workload.num_gpus)


def balanced_loss(
    errors: Sequence[float], sources: Sequence[str], stacks: Sequence[str] | None = None
) -> float:
    """Mean over sources of the mean |log error| of each source's cases; with ``stacks``,
    the mean over stacks of that of each stack's sources, so that a stack measured by many
    sources (NVIDIA's MLPerf rounds) does not set the family's pooled value alone."""
    by_source: dict[tuple[str, str], list[float]] = defaultdict(list)
    for i, (error, source) in enumerate(zip(errors, sources, strict=True)):
        by_source[(stacks[i] if stacks else "", source)].append(abs(error))
    by_stack: dict[str, list[float]] = defaultdict(list)
    for (stack, _), values in by_source.items():
        by_stack[stack].append(float(np.mean(values)))
    return float(np.mean([np.mean(v) for v in by_stack.values()]))


def nelder_mead(
    loss: Callable[[np.ndarray], float],
    start: Sequence[float] | np.ndarray,
    iterations: int = 160,
    steps: Sequence[float] | np.ndarray | None = None,
) -> tuple[np.ndarray, float]:
    """Plain Nelder-Mead (reflection 1, expansion 2, contraction 1/2, shrink 1/2); the
    initial simplex steps 0.15 along each coordinate, or ``steps``."""
    step = np.full(len(start), 0.15) if steps is None else np.asarray(steps, dtype=float)
    points = [np.asarray(start, dtype=float)]
    points += [points[0] + step[i] * np.eye(len(start))[i] for i in range(len(start))]
    values = [loss(p) for p in points]
    for _ in range(iterations):
        order = np.argsort(values)
        points, values = [points[i] for i in order], [values[i] for i in order]
        if values[-1] - values[0] < 1e-7:
            break
        centre = np.mean(points[:-1], axis=0)
        reflected = centre + (centre - points[-1])
        f_reflected = loss(reflected)
        if f_reflected < values[0]:
            expanded = centre + 2 * (centre - points[-1])
            f_expanded = loss(expanded)
            best = (expanded, f_expanded) if f_expanded < f_reflected else (reflected, f_reflected)
            points[-1], values[-1] = best
        elif f_reflected < values[-2]:
            points[-1], values[-1] = reflected, f_reflected
        else:
            contracted = centre + 0.5 * (points[-1] - centre)
            f_contracted = loss(contracted)
            if f_contracted < values[-1]:
                points[-1], values[-1] = contracted, f_contracted
            else:
                points = [points[0] + 0.5 * (p - points[0]) for p in points]
                values = [loss(p) for p in points]
    winner = int(np.argmin(values))
    return points[winner], values[winner]


#: Most fresh-simplex restarts of one family's fit.
RESTARTS = 6
#: Loss added per unit of log distance from the prior: breaks ties where the loss is flat,
#: far too small to move a fit the measurements determine (a 0.1 % error weighs as much as
#: a log distance of 1). [1]
PRIOR_PULL = 1e-3
#: Loss added per unit of log distance outside a field's bounds. [1]
BOUND_PENALTY = 1.0
#: Lower bounds of every fitted field; the upper bound is what the family's hardware
#: allows (:func:`estimator.core.calibration.hardware_limit`, each with its source).
LOWER_BOUNDS = {
    "gemm": 0.2,
    "fp8_gemm": 0.2,
    "attention": 0.05,
    "intra_node_bandwidth": 0.1,
    "memory_bandwidth": 0.3,
    "tp_overlap": 0.01,
    "elementwise_fusion": 0.01,
    "overhead_scale": 0.05,
}


def bounds(family: str, name: str) -> tuple[float, float]:
    """(lower, upper) of a fitted field: :data:`LOWER_BOUNDS` and the hardware limit."""
    return LOWER_BOUNDS[name], calibration.hardware_limit(family, name).value


def _with(prior: calibration.Efficiency, family: str, names: Sequence[str], x: np.ndarray) -> Any:
    values: dict[str, Any] = {}
    for name, log_value in zip(names, x, strict=True):
        low, high = bounds(family, name)
        values[name] = float(np.clip(math.exp(log_value), low, high))
    return dataclasses.replace(prior, **values)


#: Where a fit of a field that has no prior value of its own starts. [1]
FIELD_STARTS = {"tp_overlap": 0.3, "elementwise_fusion": 0.3, "overhead_scale": 1.0}


def fit_family(
    family: str,
    cases: Sequence[Prepared],
    start_from: dict[str, float] | None = None,
    factors: dict[str, float] | None = None,
) -> dict[str, float]:
    """Fitted fields of one family on its stated-layout cases (empty without cases),
    starting from the prior or from ``start_from`` (an earlier fit, to converge sooner);
    each case runs at its stack's factor in ``factors`` (1 where absent), so the fit is
    the pooled stack's."""
    if not cases:
        return {}
    prior = calibration.PRIORS.get(family, calibration.PRIORS["generic"])
    names = parameters_for(family, cases)
    begin = {n: getattr(prior, n) or prior.gemm for n in names} | (start_from or {})
    begin = {n: max(begin[n], FIELD_STARTS.get(n, 0.0)) for n in names}
    start = [math.log(min(begin[n], 0.98 * bounds(family, n)[1])) for n in names]
    sources, stacks = [c.source for c in cases], [c.stack for c in cases]
    factors = factors or {}
    # A stack without a factor of its own runs at the pooled one, as in an estimate.
    pooled = factors.get(POOLED_STACK, 1.0)
    case_factors = [factors.get(c.stack, pooled) for c in cases]
    prior_logs = np.log([getattr(prior, n) or prior.gemm for n in names])

    upper = np.log([bounds(family, n)[1] for n in names])
    lower = np.log([bounds(family, n)[0] for n in names])

    def loss(x: np.ndarray) -> float:
        efficiency = _with(prior, family, names, x)
        errors = [
            math.log(predict(c, efficiency, f) / c.measured)
            for c, f in zip(cases, case_factors, strict=True)
        ]
        # Beyond a bound the value is clipped and the loss would be flat there, where the
        # simplex would settle: the distance outside is added, so it walks back in.
        outside = np.maximum(x - upper, 0.0) + np.maximum(lower - x, 0.0)
        # Where a stack's factor takes a kernel fraction to its hardware limit the loss goes
        # flat: the value nearest the prior that does as well is taken.
        drift = PRIOR_PULL * float(np.sum(np.abs(x - prior_logs)))
        return (
            balanced_loss(errors, sources, stacks) + BOUND_PENALTY * float(np.sum(outside)) + drift
        )

    best, value = nelder_mead(loss, np.clip(start, lower, upper))
    # A simplex can also collapse early in a narrow valley (two fields that trade off, such
    # as gemm and attention): restart from the best point with a fresh simplex, stepping
    # inwards from a bound, until a restart no longer improves the loss.
    for _ in range(RESTARTS):
        steps = np.where(best >= upper - 1e-12, -0.15, 0.15)
        again, again_value = nelder_mead(loss, best, steps=steps)
        if again_value > value - 1e-6:
            break
        best, value = again, again_value
    fitted = dataclasses.asdict(_with(prior, family, names, best))
    return {n: round(float(fitted[n]), 4) for n in names}


_FitJob = tuple[str, list[Prepared], dict[str, float] | None, dict[str, float] | None]


def _fit_one(job: _FitJob) -> dict[str, float]:
    return fit_family(*job)


def fit_all(
    cases: Sequence[Prepared],
    start_from: dict[str, dict[str, float]] | None = None,
    processes: int = 1,
    factors: dict[str, float] | None = None,
) -> dict[str, dict[str, float]]:
    """Fitted fields of every family that has cases, at the stacks' ``factors``; families
    are independent, so with ``processes`` > 1 they are fitted in parallel (largest
    first)."""
    by_family: dict[str, list[Prepared]] = defaultdict(list)
    for case in cases:
        by_family[case.family].append(case)
    start_from = start_from or {}
    jobs = [(family, mine, start_from.get(family), factors) for family, mine in by_family.items()]
    jobs.sort(key=lambda job: -len(job[1]))
    if processes > 1 and len(jobs) > 1:
        with multiprocessing.get_context("fork").Pool(processes) as pool:
            fits = pool.map(_fit_one, jobs, chunksize=1)
    else:
        fits = [_fit_one(job) for job in jobs]
    return dict(sorted((job[0], fit) for job, fit in zip(jobs, fits, strict=True)))
