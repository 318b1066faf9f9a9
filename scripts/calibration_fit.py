"""Fit each accelerator family's efficiency parameters and cross-validate them by source.

Used by ``scripts/accuracy_report.py`` (``--fit`` writes ``estimator/data/calibration.json``).

* The cases are the shared ones (``../shared/calibration/cases.jsonl``) and the project's
  (``estimator/calibration/cases/*.jsonl``), in the same JSON Lines format.
* A case's *source* is the publication it comes from: its ``source_group`` (one README
  at one commit, one MLPerf round, one paper; the project's cases carry one), else the
  first word of its id (``foundry``, ``narayanan21``, ``nanotron``...), so the rows of
  one publication stand or fall together.
* A case's *stack* is the software it ran on (:data:`estimator.core.frameworks.STACKS`):
  its ``stack``, else its source's (:data:`SHARED_SOURCE_STACKS`).
* A family's fit minimises the stack- and source-balanced mean |ln(predicted / measured)|
  of its stated-layout cases: each stack weighs the same, and each source within it,
  whatever their row counts, so neither one large table nor one stack's many sources
  (NVIDIA's MLPerf rounds) decide the fit alone; the absolute (not squared) error keeps
  the few rows no layout-level model explains from dragging it. Nelder-Mead in log space,
  from the family's prior, within the hardware's limits
  (:func:`estimator.core.calibration.hardware_limit`). The fit is the pooled stack's: each
  case runs at its stack's factor.
* Each stack's factor (kernel fractions times it, software overheads over it) is fitted on
  the families measured on two or more stacks and shrunk towards the pooled value by its
  evidence (partial pooling); families and stacks alternate from the priors
  (:func:`fit_calibration`).
* Leave-one-stack-out and leave-one-source-out: every family the left-out cases measured is
  refitted from its prior without them, and they are predicted (stated and ``"auto"``
  layouts): a left-out stack at the others' pooled stack, a left-out source at its own
  stack's factor re-estimated without it. A family whose only source is left out falls
  back to its prior, which is what a user of an unmeasured family gets.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import multiprocessing
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from estimator.core import ScenarioError, calibration, estimate, validate_scenario
from estimator.core.frameworks import PERIOD_STACKS, POOLED_STACK, STACKS
from estimator.core.layout import evaluate_layouts
from estimator.core.layout_arrays import Layouts
from estimator.core.scenario import Scenario
from estimator.core.workload import build_workload

ROOT = Path(__file__).resolve().parent.parent
PROJECT_CASES = ROOT / "estimator" / "calibration" / "cases"
#: Phi^-1(0.9): a lognormal with this log-sd puts 80 % of its mass within +-1.2816 sigma.
Z_80 = 1.2815515655446004
#: Flags that keep a case out of the fit and the scores: the scenario cannot express it
#: (int8 training), or another publication of the same team contradicts its figure (the case
#: says how in ``excluded_because``).
EXCLUDED_FLAGS = ("int8_training", "contradicted_by_publication")
#: The smallest spread a family is given, however well its few sources agree.
MIN_SIGMA = 0.05


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


def load_cases(shared_file: Path, project_dir: Path = PROJECT_CASES) -> list[dict[str, Any]]:
    """Every case of the shared file and of the project's ``*.jsonl`` files, in order."""
    files = [shared_file, *sorted(project_dir.glob("*.jsonl"))]
    cases = []
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                case = json.loads(line)
                case["_file"] = path.name
                cases.append(case)
    return cases


def unscored_reason(case: dict[str, Any]) -> str | None:
    """Why a case does not count (None when it does): no measured throughput, an
    excluding flag, or a scenario the estimator refuses (e.g. an accelerator it lacks)."""
    if not case.get("measured", {}).get("tokens_per_s_per_gpu"):
        return "no measured tokens/s"
    flags = set(case.get("flags") or ()) & set(EXCLUDED_FLAGS)
    if flags:
        return f"flag {sorted(flags)[0]}"
    try:
        validate_scenario(case["scenario"])
    except ScenarioError as error:
        return f"{error.key}: {error.reason}"
    return None


def scored(case: dict[str, Any]) -> bool:
    """Whether a case counts (see :func:`unscored_reason`)."""
    return unscored_reason(case) is None


def source_of(case: dict[str, Any]) -> str:
    """The publication a case comes from: its ``source_group`` (one README at one commit,
    one MLPerf round, one paper), else the first word of its id."""
    return str(case.get("source_group") or str(case["id"]).split("-", 1)[0])


#: The software stack of each source of the shared file (its cases carry no ``stack``):
#: llm-foundry is Composer on PyTorch FSDP; the Megatron-LM README is Megatron-Core;
#: nanotron is nanotron; Narayanan et al. 2021 ran the 2021 Megatron-LM.
SHARED_SOURCE_STACKS = {
    "foundry": "pytorch-native",
    "megatron": "megatron-core",
    "nanotron": "nanotron",
    "narayanan21": "megatron-2021",
}


def stack_of(case: dict[str, Any]) -> str:
    """The software stack a case ran on: its ``stack``, else its source's
    (:data:`SHARED_SOURCE_STACKS`)."""
    stack = case.get("stack") or SHARED_SOURCE_STACKS.get(source_of(case))
    if stack not in STACKS:
        raise ValueError(f"case {case['id']}: no known software stack ({stack!r})")
    return str(stack)


@dataclasses.dataclass
class Prepared:
    """A stated-layout case with its validated scenario, ready to evaluate quickly."""

    case: dict[str, Any]
    scenario: Scenario
    measured: float

    @property
    def family(self) -> str:
        return self.scenario.cluster.spec.family

    @property
    def source(self) -> str:
        return source_of(self.case)

    @property
    def stack(self) -> str:
        return self.scenario.stack


def on_stack(case: dict[str, Any]) -> Scenario:
    """The case's validated scenario, run at the stack it was measured on."""
    return dataclasses.replace(validate_scenario(case["scenario"]), stack=stack_of(case))


def prepare(cases: Sequence[dict[str, Any]]) -> list[Prepared]:
    """The stated-layout cases that count, validated once."""
    return [
        Prepared(c, on_stack(c), float(c["measured"]["tokens_per_s_per_gpu"]))
        for c in cases
        if scored(c) and c["scenario"].get("parallelism") != "auto"
    ]


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


#: Key suffix of a case's prediction with its layout left to the search.
AUTO_SUFFIX = "@auto"


def as_auto(case: dict[str, Any]) -> dict[str, Any]:
    """The case with ``"parallelism": "auto"`` (its stated layout not imposed)."""
    return {**case, "scenario": {**case["scenario"], "parallelism": "auto"}}


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


def fit_record(
    cases: Sequence[dict[str, Any]],
    out_of_sample: dict[str, float | None],
    fit: Fit,
    out_of_stack: dict[str, float | None] | None = None,
) -> dict[str, Any]:
    """The content of ``estimator/data/calibration.json``: the whole fit
    (:func:`fit_calibration` on every scored case), the stacks' factors with the pooled
    stack, and each family's out-of-sample spread (leave-one-source-out, own stack).
    With ``out_of_stack`` (leave-one-stack-out predictions) the pooled stack's ``sigma``
    is :func:`between_stack_spread` of them, and ``sigma_without`` gives, by stack, the
    tau fitted without that stack's cases; without it, the factors' log-sd."""
    fits = fit.families
    counted = [c for c in cases if scored(c)]
    families: dict[str, Any] = {}
    family_of = {c["id"]: validate_scenario(c["scenario"]).cluster.spec.family for c in counted}
    for family in sorted(set(family_of.values())):
        mine = [c for c in counted if family_of[c["id"]] == family]
        errors = [
            math.log(p / float(c["measured"]["tokens_per_s_per_gpu"]))
            for c in mine
            if (p := out_of_sample.get(c["id"])) is not None and p > 0
        ]
        sigma, bias = family_spread(errors)
        families[family] = {
            "fitted": fits.get(family, {}),
            "cases": len(mine),
            "sources": len({source_of(c) for c in mine}),
            "sigma": round(sigma, 4),
            "bias": round(bias, 4),
        }
    pooled: dict[str, Any] = dict(pooled_stack(fit.stacks))
    if out_of_stack is not None:
        sigmas = {name: float(entry["sigma"]) for name, entry in families.items()}
        by_stack = stack_errors(cases, out_of_stack, sigmas)
        pooled["sigma"] = round(between_stack_spread(by_stack), 4)
        pooled["sigma_without"] = {
            stack: round(between_stack_spread(by_stack, leave_out=stack), 4)
            for stack in sorted({stack_of(c) for c in counted})
        }
    return {
        "generated_by": "scripts/accuracy_report.py --fit",
        "cases": len(counted),
        "families": families,
        "stacks": {"fitted": fit.stacks, "pooled": pooled},
    }
