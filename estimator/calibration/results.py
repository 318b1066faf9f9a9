"""Scored cases (measured against predicted tokens/s/GPU), their error statistics and the
coverage of the Monte Carlo's band."""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from typing import Any

import numpy as np

from estimator.calibration.loading import family_of, source_of, stack_of
from estimator.calibration.spread import Z_80, family_spread
from estimator.core import calibration


@dataclasses.dataclass
class CaseResult:
    """One scored case: measured and predicted tokens/s/GPU (None when it failed)."""

    case: dict[str, Any]
    measured: float
    predicted: float | None

    @property
    def error(self) -> float | None:
        if self.predicted is None:
            return None
        return (self.predicted - self.measured) / self.measured


def percentile(values: Sequence[float], fraction: float) -> float:
    """Linear interpolation between closest ranks, as score.py (NaN without values).

    Parameters
    ----------
    values : sequence of float
        The sample.
    fraction : float
        The quantile, 0 to 1. [1]

    Returns
    -------
    float
    """
    return float(np.percentile(np.asarray(values), fraction * 100)) if values else math.nan


def errors_of(results: list[CaseResult]) -> list[float]:
    """The relative errors of the cases that have a prediction. [1]"""
    return [r.error for r in results if r.error is not None]


def stats(results: list[CaseResult]) -> str:
    """'median abs | P90 abs | mean signed' cells of a group of cases (or dashes).

    Parameters
    ----------
    results : list of CaseResult
        The group.

    Returns
    -------
    str
        Three Markdown table cells of relative errors, in per cent.
    """
    errors = errors_of(results)
    if not errors:
        return "- | - | -"
    absolute = [abs(e) for e in errors]
    return (
        f"{percentile(absolute, 0.5):.1%} | {percentile(absolute, 0.9):.1%} | "
        f"{statistics.mean(errors):+.1%}"
    )


def is_stated(result: CaseResult) -> bool:
    """Whether the case states its layout (not ``"parallelism": "auto"``)."""
    return result.case["scenario"].get("parallelism") != "auto"


def band_covered(results: list[CaseResult], fit: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """Per family, (covered, scored): whether each case's measurement lies in the P10-P90
    band a user would have been shown had its source been unseen: the band is centred on
    the leave-one-source-out prediction with the spread of the family's *other* sources'
    out-of-sample errors (or the unmeasured spread when there are none).

    Parameters
    ----------
    results : list of CaseResult
        Cases predicted out of sample.
    fit : dict
        The fit record (``calibration.json``).

    Returns
    -------
    dict of str to (int, int)
        Cases inside the band and cases scored, by family.
    """
    by_family: dict[str, list[tuple[str, float]]] = {}
    for r in results:
        if r.error is not None and r.predicted:
            family = family_of(r.case)
            error = math.log(r.predicted / r.measured)
            by_family.setdefault(family, []).append((source_of(r.case), error))
    out = {}
    for family, rows in by_family.items():
        covered = 0
        for source, error in rows:
            others = [e for s, e in rows if s != source]
            sigma = family_spread(others)[0] if others else calibration.UNMEASURED_SIGMA
            covered += abs(error) <= Z_80 * sigma
        out[family] = (covered, len(rows))
    return out


def stack_band_covered(results: list[CaseResult], fit: dict[str, Any]) -> tuple[int, int]:
    """(covered, scored) of leave-one-stack-out predictions: the band an estimate without a
    stated framework shows, centred on the pooled-stack prediction with the family's spread
    and the between-stack spread, sqrt(sigma_f^2 + tau^2); tau as fitted without the
    case's own stack (``sigma_without``), since tau comes from these very errors.

    Parameters
    ----------
    results : list of CaseResult
        Cases predicted with their stack left out.
    fit : dict
        The fit record (``calibration.json``).

    Returns
    -------
    (int, int)
    """
    pooled = fit.get("stacks", {}).get("pooled", {})
    covered = total = 0
    for r in results:
        if r.error is None or not r.predicted:
            continue
        stack = stack_of(r.case)
        tau = float(pooled.get("sigma_without", {}).get(stack, pooled.get("sigma", 0.0)))
        family = fit["families"].get(family_of(r.case), {})
        sigma = float(family.get("sigma", calibration.UNMEASURED_SIGMA))
        total += 1
        covered += abs(math.log(r.predicted / r.measured)) <= Z_80 * math.hypot(sigma, tau)
    return covered, total


def stated_coverage(results: list[CaseResult], fit: dict[str, Any]) -> tuple[int, int]:
    """(covered, scored) of the stated-layout cases by :func:`band_covered`."""
    found = band_covered([r for r in results if is_stated(r)], fit).values()
    return sum(c for c, _ in found), sum(t for _, t in found)


def coverage_cell(covered: int, total: int) -> str:
    """'80% (8/10)': a band's coverage as a table cell (a dash without cases)."""
    return f"{covered / total:.0%} ({covered}/{total})" if total else "-"
