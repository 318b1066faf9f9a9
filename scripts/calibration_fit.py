"""Fit each accelerator family's efficiency parameters and cross-validate them by source.

Used by ``scripts/accuracy_report.py`` (``--fit`` writes ``estimator/data/calibration.json``).

* The cases are the shared ones (``../shared/calibration/cases.jsonl``) and the project's
  (``estimator/calibration/cases/*.jsonl``), in the same JSON Lines format.
* A case's *source* is the publication it comes from: its ``source_group`` (one README
  at one commit, one MLPerf round, one paper; the project's cases carry one), else the
  first word of its id (``foundry``, ``narayanan21``, ``nanotron``...), so the rows of
  one publication stand or fall together.
* A family's fit minimises the source-balanced mean |ln(predicted / measured)| of its
  stated-layout cases: each source weighs the same, whatever its row count, so one large
  table does not decide the fit alone; the absolute (not squared) error keeps the few rows
  no layout-level model explains from dragging it. Nelder-Mead in log space, from the
  family's prior.
* Leave-one-source-out: for every source, refit every family without it and predict its
  cases (stated and ``"auto"`` layouts). A family whose only source is left out falls back
  to its prior, which is what a user of an unmeasured family gets.
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
from estimator.core.layout import Layouts, evaluate_layouts
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
    TP overlap; for TPUs the effective memory-bandwidth fraction (above 0.8 where XLA fuses
    the memory-bound work into the matmuls) and the ICI link efficiency.
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
        names += ["memory_bandwidth", "intra_node_bandwidth"]
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


def prepare(cases: Sequence[dict[str, Any]]) -> list[Prepared]:
    """The stated-layout cases that count, validated once."""
    return [
        Prepared(c, validate_scenario(c["scenario"]), float(c["measured"]["tokens_per_s_per_gpu"]))
        for c in cases
        if scored(c) and c["scenario"].get("parallelism") != "auto"
    ]


def predict(case: Prepared, efficiency: calibration.Efficiency) -> float:
    """Predicted tokens/s/GPU of a stated-layout case under ``efficiency``."""
    workload = build_workload(case.scenario, efficiency)
    layout = case.scenario.parallelism
    assert layout is not None
    result = evaluate_layouts(workload, Layouts.single(layout))
    return float(result.tokens_per_step[0] / result.step_time[0] / workload.num_gpus)


def balanced_loss(errors: Sequence[float], sources: Sequence[str]) -> float:
    """Mean over sources of the mean |log error| of each source's cases."""
    by_source: dict[str, list[float]] = defaultdict(list)
    for error, source in zip(errors, sources, strict=True):
        by_source[source].append(abs(error))
    return float(np.mean([np.mean(v) for v in by_source.values()]))


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
#: Loss added per unit of log distance outside a field's bounds. [1]
BOUND_PENALTY = 1.0
#: Bounds of every fitted field (fractions of a peak; link efficiency may exceed 1 on a
#: torus, where a collective drives several links at once).
BOUNDS = {
    "gemm": (0.2, 0.95),
    "fp8_gemm": (0.2, 0.95),
    "attention": (0.05, 0.90),
    "intra_node_bandwidth": (0.1, 4.0),
    "memory_bandwidth": (0.3, 2.5),
    "tp_overlap": (0.01, 0.90),
}


def _with(prior: calibration.Efficiency, names: Sequence[str], x: np.ndarray) -> Any:
    values: dict[str, Any] = {}
    for name, log_value in zip(names, x, strict=True):
        low, high = BOUNDS[name]
        values[name] = float(np.clip(math.exp(log_value), low, high))
    return dataclasses.replace(prior, **values)


def fit_family(
    family: str, cases: Sequence[Prepared], start_from: dict[str, float] | None = None
) -> dict[str, float]:
    """Fitted fields of one family on its stated-layout cases (empty without cases),
    starting from the prior or from ``start_from`` (an earlier fit, to converge sooner)."""
    if not cases:
        return {}
    prior = calibration.PRIORS.get(family, calibration.PRIORS["generic"])
    names = parameters_for(family, cases)
    begin = {n: getattr(prior, n) or prior.gemm for n in names} | (start_from or {})
    begin = {n: begin[n] if n != "tp_overlap" else max(begin[n], 0.3) for n in names}
    start = [math.log(begin[n]) for n in names]
    sources = [c.source for c in cases]

    upper = np.log([BOUNDS[n][1] for n in names])
    lower = np.log([BOUNDS[n][0] for n in names])

    def loss(x: np.ndarray) -> float:
        efficiency = _with(prior, names, x)
        errors = [math.log(predict(c, efficiency) / c.measured) for c in cases]
        # Beyond a bound the value is clipped and the loss would be flat there, where the
        # simplex would settle: the distance outside is added, so it walks back in.
        outside = np.maximum(x - upper, 0.0) + np.maximum(lower - x, 0.0)
        return balanced_loss(errors, sources) + BOUND_PENALTY * float(np.sum(outside))

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
    fitted = dataclasses.asdict(_with(prior, names, best))
    return {n: round(float(fitted[n]), 4) for n in names}


def _fit_one(job: tuple[str, list[Prepared], dict[str, float] | None]) -> dict[str, float]:
    return fit_family(*job)


def fit_all(
    cases: Sequence[Prepared],
    start_from: dict[str, dict[str, float]] | None = None,
    processes: int = 1,
) -> dict[str, dict[str, float]]:
    """Fitted fields of every family that has cases; families are independent, so with
    ``processes`` > 1 they are fitted in parallel (largest first)."""
    by_family: dict[str, list[Prepared]] = defaultdict(list)
    for case in cases:
        by_family[case.family].append(case)
    start_from = start_from or {}
    jobs = [(family, mine, start_from.get(family)) for family, mine in by_family.items()]
    jobs.sort(key=lambda job: -len(job[1]))
    if processes > 1 and len(jobs) > 1:
        with multiprocessing.get_context("fork").Pool(processes) as pool:
            fits = pool.map(_fit_one, jobs, chunksize=1)
    else:
        fits = [_fit_one(job) for job in jobs]
    return dict(sorted((job[0], fit) for job, fit in zip(jobs, fits, strict=True)))


def efficiencies(fits: dict[str, dict[str, float]]) -> dict[str, calibration.Efficiency]:
    """The family table a set of fits gives (priors where a family has no fit)."""
    return calibration.with_bf16_from_fp8(
        {
            family: calibration.with_fitted(prior, fits.get(family) or {})
            for family, prior in calibration.PRIORS.items()
        }
    )


@contextlib.contextmanager
def families_in_force(table: dict[str, calibration.Efficiency]) -> Iterator[None]:
    """Make ``estimate`` (and its layout search) use ``table`` for the duration."""
    saved = dict(calibration.FAMILY_EFFICIENCY)
    calibration.FAMILY_EFFICIENCY.update(table)
    try:
        yield
    finally:
        calibration.FAMILY_EFFICIENCY.clear()
        calibration.FAMILY_EFFICIENCY.update(saved)


def predict_case(case: dict[str, Any], table: dict[str, calibration.Efficiency]) -> float | None:
    """Predicted tokens/s/GPU of any case (``"auto"`` through the search); None on error."""
    with families_in_force(table):
        try:
            return float(estimate(case["scenario"])["tokens_per_s_per_gpu"])
        except Exception:
            return None


def fits_without(
    source: str, prepared: Sequence[Prepared], whole: dict[str, dict[str, float]]
) -> dict[str, dict[str, float]]:
    """The fits with ``source`` left out. Only the families it measured change: the others
    keep the whole fit (refitting them from it on the same cases returns it, to the fit's
    tolerance), and a family whose only source it is has no fit (its prior)."""
    touched = {p.family for p in prepared if p.source == source}
    kept = [p for p in prepared if p.source != source and p.family in touched]
    untouched = {family: fit for family, fit in whole.items() if family not in touched}
    return untouched | fit_all(kept, whole)


def _predict_left_out(
    job: tuple[str, list[dict[str, Any]], dict[str, dict[str, float]]],
) -> dict[str, float | None]:
    """Refit without ``source`` and predict its cases (one process's share of the work)."""
    source, counted, whole = job
    table = efficiencies(fits_without(source, prepare(counted), whole))
    mine = [c for c in counted if source_of(c) == source]
    out = {c["id"]: predict_case(c, table) for c in mine}
    # The same cases with the layout left to the search ("auto"), as planners run them.
    out.update({f"{c['id']}{AUTO_SUFFIX}": predict_case(as_auto(c), table) for c in mine})
    return out


#: Key suffix of a case's prediction with its layout left to the search.
AUTO_SUFFIX = "@auto"


def as_auto(case: dict[str, Any]) -> dict[str, Any]:
    """The case with ``"parallelism": "auto"`` (its stated layout not imposed)."""
    return {**case, "scenario": {**case["scenario"], "parallelism": "auto"}}


def leave_one_source_out(
    cases: Sequence[dict[str, Any]],
    whole: dict[str, dict[str, float]],
    progress: Callable[[str], None] | None = None,
    processes: int = 2,
) -> dict[str, float | None]:
    """Out-of-sample prediction of every scored case: fitted without its own source, each
    refit starting from ``whole`` (the fit on every case)."""
    counted = [c for c in cases if scored(c)]
    sources = sorted({source_of(c) for c in counted})
    jobs = [(source, counted, whole) for source in sources]
    out: dict[str, float | None] = {}
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        for source, found in zip(sources, pool.imap(_predict_left_out, jobs), strict=True):
            if progress is not None:
                progress(source)
            out.update(found)
    return out


def family_spread(errors: Sequence[float]) -> tuple[float, float]:
    """(sigma, bias) of out-of-sample log errors: P80 of |e| / Phi^-1(0.9), median e."""
    if not errors:
        return calibration.UNMEASURED_SIGMA, 0.0
    sigma = float(np.percentile(np.abs(errors), 80)) / Z_80
    return max(sigma, MIN_SIGMA), float(np.median(errors))


def fit_record(
    cases: Sequence[dict[str, Any]],
    out_of_sample: dict[str, float | None],
    fits: dict[str, dict[str, float]],
) -> dict[str, Any]:
    """The content of ``estimator/data/calibration.json``: the whole fit (``fit_all`` on
    every scored case) and each family's out-of-sample spread."""
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
    return {
        "generated_by": "scripts/accuracy_report.py --fit",
        "cases": len(counted),
        "families": families,
    }
