"""Leave-one-stack-out and leave-one-source-out predictions of the cases.

Every family the left-out cases measured is refitted from its prior without them, and they
are predicted (stated and ``"auto"`` layouts): a left-out stack at the others' pooled
stack, a left-out source at its own stack's factor re-estimated without it. A family whose
only source is left out falls back to its prior, which is what a user of an unmeasured
family gets.
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from estimator.calibration.families import fit_all
from estimator.calibration.loading import (
    AUTO_SUFFIX,
    Prepared,
    as_auto,
    prepare,
    scored,
    source_of,
    stack_of,
)
from estimator.calibration.stacks import Fit, efficiencies, factors_of, fit_stacks
from estimator.core import calibration, estimate, validate_scenario
from estimator.core.frameworks import POOLED_STACK


@contextlib.contextmanager
def families_in_force(
    table: dict[str, calibration.Efficiency], factors: dict[str, float] | None = None
) -> Iterator[None]:
    """Make ``estimate`` (and its layout search) use ``table`` and the stacks' ``factors``
    for the duration."""
    families, stacks = dict(calibration.FAMILY_EFFICIENCY), dict(calibration.STACK_FACTORS)
    calibration.FAMILY_EFFICIENCY.update(table)
    if factors is not None:
        calibration.STACK_FACTORS.clear()
        calibration.STACK_FACTORS.update(factors)
    try:
        yield
    finally:
        calibration.FAMILY_EFFICIENCY.clear()
        calibration.FAMILY_EFFICIENCY.update(families)
        calibration.STACK_FACTORS.clear()
        calibration.STACK_FACTORS.update(stacks)


def predict_case(
    case: dict[str, Any],
    table: dict[str, calibration.Efficiency],
    factors: dict[str, float],
    stack: str | None = None,
) -> float | None:
    """Predicted tokens/s/GPU of any case (``"auto"`` through the search) at ``stack`` (the
    case's own when None); None on error."""
    with families_in_force(table, factors):
        try:
            scenario = dataclasses.replace(
                validate_scenario(case["scenario"]), stack=stack or stack_of(case)
            )
            return float(estimate(scenario)["tokens_per_s_per_gpu"])
        except Exception:
            return None


def _predictions(
    mine: Sequence[dict[str, Any]],
    table: dict[str, calibration.Efficiency],
    factors: dict[str, float],
    stack: str | None = None,
) -> dict[str, float | None]:
    """Stated-layout and ``"auto"``-layout predictions of ``mine``."""
    out = {c["id"]: predict_case(c, table, factors, stack) for c in mine}
    # The same cases with the layout left to the search ("auto"), as planners run them.
    out.update(
        {f"{c['id']}{AUTO_SUFFIX}": predict_case(as_auto(c), table, factors, stack) for c in mine}
    )
    return out


def fit_without(
    left_out: Callable[[Prepared], bool], prepared: Sequence[Prepared], whole: Fit
) -> Fit:
    """The fit without the cases ``left_out`` selects, refitted from the priors: every
    family they measured is fitted again from its prior on the rest (a family they alone
    measured keeps its prior), and the stacks they ran on again from the rest, at the
    whole fit's families. Families they did not measure keep the whole fit."""
    kept = [p for p in prepared if not left_out(p)]
    touched = {p.family for p in prepared if left_out(p)}
    stacks = dict(whole.stacks)
    own_stacks = {p.stack for p in prepared if left_out(p)}
    refitted = fit_stacks(kept, whole.families)
    for stack in own_stacks:
        stacks.pop(stack, None)
        if stack in refitted:
            stacks[stack] = refitted[stack]
    untouched = {f: fit for f, fit in whole.families.items() if f not in touched}
    mine = [p for p in kept if p.family in touched]
    return Fit(untouched | fit_all(mine, factors=factors_of(stacks)), stacks)


def _predict_left_out_source(
    job: tuple[str, list[dict[str, Any]], Fit],
) -> dict[str, float | None]:
    """Refit without ``source`` and predict its cases (one process's share of the work)."""
    source, counted, whole = job
    fit = fit_without(lambda p: p.source == source, prepare(counted), whole)
    mine = [c for c in counted if source_of(c) == source]
    return _predictions(mine, efficiencies(fit.families), fit.factors)


def _predict_left_out_stack(
    job: tuple[str, list[dict[str, Any]], Fit],
) -> dict[str, float | None]:
    """Refit without every case of ``stack`` and predict them at the pooled stack of the
    others: what a user of a stack the calibration never saw gets."""
    stack, counted, whole = job
    fit = fit_without(lambda p: p.stack == stack, prepare(counted), whole)
    mine = [c for c in counted if stack_of(c) == stack]
    return _predictions(mine, efficiencies(fit.families), fit.factors, POOLED_STACK)


def _left_out(
    worker: Callable[[tuple[str, list[dict[str, Any]], Fit]], dict[str, float | None]],
    groups: Sequence[str],
    counted: list[dict[str, Any]],
    whole: Fit,
    progress: Callable[[str], None] | None,
    processes: int,
) -> dict[str, float | None]:
    jobs = [(group, counted, whole) for group in groups]
    out: dict[str, float | None] = {}
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        for group, found in zip(groups, pool.imap(worker, jobs), strict=True):
            if progress is not None:
                progress(group)
            out.update(found)
    return out


def leave_one_source_out(
    cases: Sequence[dict[str, Any]],
    whole: Fit,
    progress: Callable[[str], None] | None = None,
    processes: int = 2,
) -> dict[str, float | None]:
    """Out-of-sample prediction of every scored case at its own stack: fitted without its
    own source (:func:`fit_without`)."""
    counted = [c for c in cases if scored(c)]
    sources = sorted({source_of(c) for c in counted})
    return _left_out(_predict_left_out_source, sources, counted, whole, progress, processes)


def leave_one_stack_out(
    cases: Sequence[dict[str, Any]],
    whole: Fit,
    progress: Callable[[str], None] | None = None,
    processes: int = 2,
) -> dict[str, float | None]:
    """Out-of-sample prediction of every scored case at the pooled stack, fitted without
    any case of its own stack (:func:`fit_without`)."""
    counted = [c for c in cases if scored(c)]
    stacks = sorted({stack_of(c) for c in counted})
    return _left_out(_predict_left_out_stack, stacks, counted, whole, progress, processes)
