"""The spread of out-of-sample errors: each family's, and the between-stack spread an
estimate without a stated framework carries."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from estimator.calibration.loading import prepare, scored
from estimator.calibration.stacks import contrast_cases
from estimator.core import calibration
from estimator.core.frameworks import PERIOD_STACKS

#: Phi^-1(0.9): a lognormal with this log-sd puts 80 % of its mass within +-1.2816 sigma.
Z_80 = 1.2815515655446004
#: The smallest spread a family is given, however well its few sources agree.
MIN_SIGMA = 0.05


def family_spread(errors: Sequence[float]) -> tuple[float, float]:
    """(sigma, bias) of out-of-sample log errors: P80 of |e| / Phi^-1(0.9), median e."""
    if not errors:
        return calibration.UNMEASURED_SIGMA, 0.0
    sigma = float(np.percentile(np.abs(errors), 80)) / Z_80
    return max(sigma, MIN_SIGMA), float(np.median(errors))


def weighted_quantile(values: Sequence[float], weights: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``values`` under ``weights`` (the smallest value whose share of
    the total weight at or below it reaches ``q``)."""
    order = np.argsort(values)
    cumulative = np.cumsum(np.asarray(weights, dtype=np.float64)[order])
    index = int(np.searchsorted(cumulative, q * cumulative[-1]))
    return float(np.asarray(values, dtype=np.float64)[order][min(index, len(order) - 1)])


def between_stack_spread(
    errors: dict[str, list[tuple[float, float]]], leave_out: str | None = None
) -> float:
    """tau, the spread a stack the calibration never saw lands at around the pooled-stack
    prediction, beyond its family's own spread.

    From the leave-one-stack-out log errors of the cases whose family was measured on
    other stacks too (elsewhere a left-out stack leaves its family on its prior, which is
    the family's ignorance, not the stacks' spread), each stack weighing the same:
    S = weighted P80 of |e| / Phi^-1(0.9), and tau = sqrt(max(0, S^2 - mean sigma_f^2)).

    Parameters
    ----------
    errors : dict
        By stack, (log error, the family's sigma) of each such case.
    leave_out : str, optional
        A stack whose errors are left out (the tau its own band would have been given).

    Returns
    -------
    float
        tau [1]; 0 with no errors.
    """
    values, weights, family = [], [], []
    for stack, rows in errors.items():
        if stack == leave_out or not rows:
            continue
        for error, sigma in rows:
            values.append(abs(error))
            weights.append(1.0 / len(rows))
            family.append(sigma * sigma)
    if not values:
        return 0.0
    spread = weighted_quantile(values, weights, 0.8) / Z_80
    mean_family = float(np.average(family, weights=weights))
    return math.sqrt(max(0.0, spread * spread - mean_family))


def stack_errors(
    cases: Sequence[dict[str, Any]],
    out_of_stack: dict[str, float | None],
    sigmas: dict[str, float],
) -> dict[str, list[tuple[float, float]]]:
    """By current stack, (leave-one-stack-out log error, family sigma) of the stated-layout
    cases of families measured on two or more stacks (:func:`contrast_cases`)."""
    prepared = prepare([c for c in cases if scored(c)])
    out: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for case in contrast_cases(prepared):
        predicted = out_of_stack.get(case.case["id"])
        if case.stack in PERIOD_STACKS or predicted is None or predicted <= 0:
            continue
        sigma = sigmas.get(case.family, calibration.UNMEASURED_SIGMA)
        out[case.stack].append((math.log(predicted / case.measured), sigma))
    return dict(out)
