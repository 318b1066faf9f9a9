"""Each software stack's factor on kernel efficiency, and the whole fit of families and
stacks together.

Each stack's factor (kernel fractions times it, software overheads over it) is fitted on
the families measured on two or more stacks and shrunk towards the pooled value by its
evidence (partial pooling); families and stacks alternate from the priors
(:func:`fit_calibration`).
"""

from __future__ import annotations

import dataclasses
import math
import multiprocessing
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from estimator.calibration.families import balanced_loss, fit_all, predict
from estimator.calibration.loading import Prepared
from estimator.core import calibration
from estimator.core.frameworks import PERIOD_STACKS, POOLED_STACK

#: Pseudo-sources at the pooled value that a stack's own estimate is shrunk with (partial
#: pooling): a stack measured by m sources keeps m / (m + 1) of its own log offset.
STACK_PRIOR_SOURCES = 1.0
#: Widest stack offset searched, as a log factor on kernel efficiency. [1]
STACK_LOG_RANGE = 0.5
#: Offsets tried, evenly over the range (steps of 0.025). [1]
STACK_GRID = 41
#: Loss (mean |log error|) within which an offset counts as good as the best. [1]
TIE = 2e-3
#: Alternations of family fits and stack offsets in the whole fit.
STACK_ROUNDS = 3


def contrast_cases(cases: Sequence[Prepared]) -> list[Prepared]:
    """The cases that tell stacks apart: those of families measured on two or more
    stacks (in a family with one stack, family and stack cannot be separated)."""
    stacks: dict[str, set[str]] = defaultdict(set)
    for case in cases:
        stacks[case.family].add(case.stack)
    return [c for c in cases if len(stacks[c.family]) > 1]


def _stack_offset(
    job: tuple[str, list[Prepared], dict[str, calibration.Efficiency]],
) -> tuple[str, float, int, int]:
    """(stack, shrunk log offset, cases, sources) of one stack's contrast cases."""
    stack, mine, table = job

    def loss(log_factor: float) -> float:
        factor = math.exp(log_factor)
        errors = [math.log(predict(c, table[c.family], factor) / c.measured) for c in mine]
        return balanced_loss(errors, [c.source for c in mine])

    grid = np.linspace(-STACK_LOG_RANGE, STACK_LOG_RANGE, STACK_GRID)
    losses = np.array([loss(x) for x in grid])
    # Where the kernel fractions reach their hardware limits the loss goes flat: the
    # smallest offset within TIE of the best does as well.
    near = grid[losses <= losses.min() + TIE]
    own = float(near[np.argmin(np.abs(near))])
    sources = len({c.source for c in mine})
    return stack, own * sources / (sources + STACK_PRIOR_SOURCES), len(mine), sources


def fit_stacks(
    cases: Sequence[Prepared], fits: dict[str, dict[str, float]], processes: int = 1
) -> dict[str, dict[str, float]]:
    """Each stack's factor on kernel efficiency, given the families' fits (the pooled
    stack's), from the cases of families measured on several stacks.

    A stack's own log offset minimises its cases' source-balanced mean |log error|; partial
    pooling shrinks it towards the pooled value 0 by its evidence (:data:`STACK_PRIOR_SOURCES`).

    Returns
    -------
    dict
        ``{stack: {"factor", "cases", "sources"}}`` for the stacks with contrast cases.
    """
    table = efficiencies(fits)
    by_stack: dict[str, list[Prepared]] = defaultdict(list)
    for case in contrast_cases(cases):
        by_stack[case.stack].append(case)
    jobs = [(stack, mine, table) for stack, mine in sorted(by_stack.items())]
    if processes > 1 and len(jobs) > 1:
        with multiprocessing.get_context("fork").Pool(processes) as pool:
            found = pool.map(_stack_offset, jobs, chunksize=1)
    else:
        found = [_stack_offset(job) for job in jobs]
    return {
        stack: {"factor": round(math.exp(offset), 4), "cases": n, "sources": m}
        for stack, offset, n, m in found
    }


def pooled_stack(stacks: dict[str, dict[str, float]]) -> dict[str, float]:
    """The pooled stack: the median factor of the current stacks and their log-sd around
    it (the between-stack spread an estimate without a stated framework carries)."""
    logs = [math.log(v["factor"]) for k, v in stacks.items() if k not in PERIOD_STACKS]
    if not logs:
        return {"factor": 1.0, "sigma": 0.0}
    centre = float(np.median(logs))
    spread = float(np.sqrt(np.mean([(x - centre) ** 2 for x in logs])))
    return {"factor": round(math.exp(centre), 4), "sigma": round(spread, 4)}


def factors_of(stacks: dict[str, dict[str, float]]) -> dict[str, float]:
    """Factor by stack, ``pooled`` included, of :func:`fit_stacks`' result."""
    factors = {k: float(v["factor"]) for k, v in stacks.items()}
    factors[POOLED_STACK] = pooled_stack(stacks)["factor"]
    return factors


@dataclasses.dataclass
class Fit:
    """The families' fits (the pooled stack's) and the stacks' factors."""

    families: dict[str, dict[str, float]]
    stacks: dict[str, dict[str, float]]

    @property
    def factors(self) -> dict[str, float]:
        return factors_of(self.stacks)


def fit_calibration(
    cases: Sequence[Prepared],
    processes: int = 1,
    rounds: int = STACK_ROUNDS,
    start_from: Fit | None = None,
) -> Fit:
    """Families and stacks together, from the priors: alternately fit every family at the
    current stack factors and the stacks at the current family fits, ``rounds`` times."""
    stacks = start_from.stacks if start_from else {}
    families = start_from.families if start_from else {}
    for _ in range(rounds):
        families = fit_all(cases, families, processes, factors_of(stacks))
        stacks = fit_stacks(cases, families, processes)
    return Fit(families, stacks)


def efficiencies(fits: dict[str, dict[str, float]]) -> dict[str, calibration.Efficiency]:
    """The family table a set of fits gives (priors where a family has no fit)."""
    return calibration.with_bf16_from_fp8(
        {
            family: calibration.with_fitted(prior, fits.get(family) or {})
            for family, prior in calibration.PRIORS.items()
        }
    )
