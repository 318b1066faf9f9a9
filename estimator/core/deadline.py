"""Will a run finish by the deadline: the probability and a verdict from the Monte Carlo's days.

:func:`~estimator.core.montecarlo.monte_carlo` samples the training wall clock; it keeps the
samples' percentiles on a grid of :data:`DAYS_QUANTILE_LEVELS` (:func:`days_quantiles`), a
hundred and one numbers that stand for thousands of samples. The share of samples that finish
within the days left is then read back off that grid (:func:`finish_probability`): exact at
each whole percent, linear in between, so within one percentage point of counting the samples
themselves (:func:`finish_share`).

The verdict compares the days left with the P50 and P90 of the days, the figures every table
shows: "meets at P50 and P90", "meets at P50, misses at P90" or "misses at P50"; a project
without a deadline gets "no deadline set", not a verdict. A run exactly on the deadline meets it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

#: The percent levels at which the Monte Carlo keeps the days' quantiles: 0 (the fastest
#: sample), 1, ..., 100 (the slowest). [%]
DAYS_QUANTILE_LEVELS: tuple[int, ...] = tuple(range(101))

MEETS = "meets"
MISSES_P90 = "misses_p90"
MISSES_P50 = "misses_p50"
NO_DEADLINE = "no_deadline"

#: Each verdict in words, as every page and the sign-off pack show it.
VERDICT_TEXT = {
    MEETS: "meets at P50 and P90",
    MISSES_P90: "meets at P50, misses at P90",
    MISSES_P50: "misses at P50",
    NO_DEADLINE: "no deadline set",
}


def days_quantiles(days: npt.ArrayLike) -> list[float]:
    """The samples' quantiles at :data:`DAYS_QUANTILE_LEVELS` (numpy's linear interpolation,
    as :func:`~estimator.core.montecarlo.percentiles`, so level 50 is the P50 reported).

    Parameters
    ----------
    days : array_like
        Training wall clock of each sample. [days]

    Returns
    -------
    list of float
        101 non-decreasing values. [days]
    """
    data = np.asarray(days, dtype=np.float64)
    return [float(value) for value in np.percentile(data, DAYS_QUANTILE_LEVELS)]


def finish_share(days: npt.ArrayLike, days_available: float) -> float:
    """The share of samples that finish within ``days_available`` (days <= available). [1]"""
    data = np.asarray(days, dtype=np.float64)
    return float(np.count_nonzero(data <= days_available) / data.size)


def finish_probability(
    quantiles: Sequence[float],
    days_available: float,
    levels: Sequence[float] = DAYS_QUANTILE_LEVELS,
) -> float:
    """P(days <= ``days_available``) read off the quantile grid.

    With q_k the quantile at level L_k (non-decreasing), the probability is the highest level
    whose quantile is within the days available, interpolated linearly towards the next:
    L_i + (d - q_i) / (q_{i+1} - q_i) (L_{i+1} - L_i) for q_i <= d < q_{i+1}; 0 below the
    fastest sample and 1 from the slowest on. Ties (a flat stretch of q) take its top level.

    Parameters
    ----------
    quantiles : sequence of float
        Days at each of ``levels``. [days]
    days_available : float
        Days from the start to the deadline. [days]
    levels : sequence of float
        The percent levels of ``quantiles``, increasing from 0 to 100. [%]

    Returns
    -------
    float
        The probability of finishing by the deadline, 0 to 1. [1]
    """
    values = np.asarray(quantiles, dtype=np.float64)
    steps = np.asarray(levels, dtype=np.float64)
    above = int(np.searchsorted(values, days_available, side="right"))
    if above == 0:
        return 0.0
    if above == len(values):
        return 1.0
    low, high = values[above - 1], values[above]
    share = (days_available - low) / (high - low)
    level = steps[above - 1] + share * (steps[above] - steps[above - 1])
    return float(level / 100.0)


@dataclass(frozen=True)
class DeadlineCheck:
    """One run against the project's deadline.

    ``days_available`` is None when the project has no deadline; ``probability`` is None then,
    and for a Monte Carlo that predates the quantile grid (the verdict still stands on the
    P50 and P90).
    """

    days_available: float | None
    p50_days: float
    p90_days: float
    probability: float | None

    @property
    def verdict(self) -> str:
        """:data:`MEETS`, :data:`MISSES_P90`, :data:`MISSES_P50` or :data:`NO_DEADLINE`."""
        if self.days_available is None:
            return NO_DEADLINE
        if self.p50_days > self.days_available:
            return MISSES_P50
        return MISSES_P90 if self.p90_days > self.days_available else MEETS

    @property
    def text(self) -> str:
        return VERDICT_TEXT[self.verdict]

    @property
    def probability_text(self) -> str:
        """``62%``; ``<1%`` and ``>99%`` rather than rounding a chance to certainty."""
        if self.probability is None:
            return ""
        if 0.0 < self.probability < 0.01:
            return "<1%"
        if 0.99 < self.probability < 1.0:
            return ">99%"
        return f"{100 * self.probability:.0f}%"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: the fields, ``verdict``, ``text`` and ``probability_text``."""
        return {
            "days_available": self.days_available,
            "p50_days": self.p50_days,
            "p90_days": self.p90_days,
            "probability": self.probability,
            "probability_text": self.probability_text,
            "verdict": self.verdict,
            "text": self.text,
        }


def deadline_check(
    training_days: Mapping[str, Any],
    days_available: float | None,
    quantiles: Sequence[float] | None = None,
) -> DeadlineCheck:
    """The deadline check of a Monte Carlo's days.

    Parameters
    ----------
    training_days : mapping
        ``p50`` and ``p90`` of the training wall clock. [days]
    days_available : float or None
        Days from the start to the deadline; None when there is no deadline. [days]
    quantiles : sequence of float, optional
        The days at :data:`DAYS_QUANTILE_LEVELS` (``training_days_quantiles`` of the Monte
        Carlo); without them the check has no probability.

    Returns
    -------
    DeadlineCheck
    """
    probability = None
    if days_available is not None and quantiles:
        probability = finish_probability(quantiles, days_available)
    return DeadlineCheck(
        days_available=days_available,
        p50_days=float(training_days["p50"]),
        p90_days=float(training_days["p90"]),
        probability=probability,
    )


__all__ = [
    "DAYS_QUANTILE_LEVELS",
    "MEETS",
    "MISSES_P50",
    "MISSES_P90",
    "NO_DEADLINE",
    "VERDICT_TEXT",
    "DeadlineCheck",
    "days_quantiles",
    "deadline_check",
    "finish_probability",
    "finish_share",
]
