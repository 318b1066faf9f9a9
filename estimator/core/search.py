"""Layout search: every valid parallel layout of a scenario, evaluated at once, best first.

The grid of candidate layouts and the structural rules that reject one are
:mod:`estimator.core.search_grid`. Every layout that passes them is evaluated
(:func:`estimator.core.layout.evaluate_layouts`, all at once); one that needs more memory
than the framework profile's usable share is rejected as ``does_not_fit``. Each rejected
layout counts once, under the first rule it breaks, so
``layouts_considered = layouts_fitting + sum(rejected)``. Every layout kept passes
:func:`estimator.core.validation.check_layout` (tested).

The grid is one flat index space; :func:`search_chunk` evaluates a contiguous slice of it
and :func:`merge_search_results` combines slices, so the work splits into independent
tasks whose merge equals :func:`search`.

Objective ``"time"`` ranks by ``training_days``; ``"cost"`` by ``gpu_hours`` (times the
optional ``cost.price_per_gpu_hour``). At a fixed GPU count the two orders are the same,
since gpu_hours = training_days x 24 x num_gpus; they differ only across cluster sizes
(see :mod:`estimator.core.capacity`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from estimator.core.compare import alternatives, with_comparisons
from estimator.core.costing import cost_of
from estimator.core.errors import ScenarioError
from estimator.core.explicit import DOES_NOT_FIT_NOTE, FORMAT_VERSION, estimate_scenario
from estimator.core.frameworks import profile_for, stack_assumed
from estimator.core.layout import evaluate_layouts
from estimator.core.memory import GIB, RECOMPUTE_CODES
from estimator.core.scenario import Scenario
from estimator.core.search_grid import (
    AXES,
    REJECTION_REASONS,
    IntArray,
    grid_size,
    layout_config,
    layouts_from_columns,
    structural_slice,
)
from estimator.core.validation import price_per_gpu_hour, validate_scenario
from estimator.core.workload import Workload, build_workload

OBJECTIVES = ("time", "cost")
#: Layouts evaluated per evaluate_layouts call, bounding temporary memory (~0.5 GB).
CHUNK_LAYOUTS = 1 << 18
#: Grid indices decoded and filtered at a time.
BLOCK_LAYOUTS = 1 << 20
#: Extra candidates kept beyond top_k so that ties and rounding cannot change the order.
_SLACK = 8
#: Relative margin over the top_k-th best vectorised score within which a kept candidate is
#: estimated in full. The vectorised and explicit figures agree to 1e-9 (tested) and training
#: days rise strictly with seconds per token at a fixed cluster
#: (:func:`estimator.core.wholerun.whole_run`), so a candidate beyond this margin is beaten
#: by top_k others in the explicit order too, and estimating it cannot change the result.
_TIE_MARGIN = 1e-6


@dataclass(frozen=True)
class _Evaluated:
    """Seconds per token and memory of the structurally valid layouts of a slice."""

    seconds_per_token: npt.NDArray[np.float64]
    total_memory: npt.NDArray[np.float64]


def _evaluate(workload: Workload, columns: Mapping[str, IntArray]) -> _Evaluated:
    count = len(columns["tp"])
    per_token, memory = np.empty(count), np.empty(count)
    for start in range(0, count, CHUNK_LAYOUTS):
        part = {k: v[start : start + CHUNK_LAYOUTS] for k, v in columns.items()}
        with np.errstate(all="ignore"):
            layouts = layouts_from_columns(part, workload.framework.sequence_parallel)
            results = evaluate_layouts(workload, layouts)
        stop = start + len(part["tp"])
        per_token[start:stop] = results.step_time / results.tokens_per_step
        memory[start:stop] = results.total_memory
    return _Evaluated(per_token, memory)


def _rank_key(result: Mapping[str, Any], objective: str) -> tuple[Any, ...]:
    """Sort key of an estimate output: the objective, then the layout (for stable ties)."""
    parallelism = result["parallelism"]
    figure = result["training_days"] if objective == "time" else result["gpu_hours"]
    layout = tuple(parallelism[k] for k in ("tp", "pp", "dp", "cp", "ep", "micro_batch_size"))
    extra = (
        parallelism["zero_stage"],
        RECOMPUTE_CODES[parallelism["recompute"]],
        parallelism["virtual_stages"],
    )
    return (figure, *layout, *extra)


def _with_cost(result: dict[str, Any], price: float | None) -> dict[str, Any]:
    if price is not None:
        result["cost"] = {"price_per_gpu_hour": price, "total": cost_of(result["gpu_hours"], price)}
    return result


def _estimate_rows(
    scenario: Scenario, columns: Mapping[str, IntArray], rows: IntArray
) -> list[dict[str, Any]]:
    """Full ``estimate`` outputs of some rows, through estimate's own code path."""
    profile = profile_for(scenario.framework, scenario.cluster.spec.family)
    return [
        estimate_scenario(
            dataclasses.replace(
                scenario,
                parallelism=layout_config(columns, int(row), profile.sequence_parallel),
            )
        )
        for row in rows
    ]


def _best_rows(order_by: npt.NDArray[np.float64], flat: IntArray, count: int) -> IntArray:
    """Indices of the ``count`` smallest values, ties broken by grid index."""
    if len(order_by) > count:
        candidates = np.argpartition(order_by, count - 1)[:count]
        cutoff = order_by[candidates].max()
        candidates = np.flatnonzero(order_by <= cutoff)
    else:
        candidates = np.arange(len(order_by))
    ranked = candidates[np.lexsort((flat[candidates], order_by[candidates]))]
    return ranked[:count]


@dataclass(frozen=True)
class _Request:
    scenario: Scenario
    top_k: int
    objective: str
    price: float | None


def _request(scenario: Mapping[str, Any] | Scenario, top_k: int, objective: str) -> _Request:
    if objective not in OBJECTIVES:
        raise ScenarioError("objective", f"must be one of {OBJECTIVES}, got {objective!r}")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ScenarioError("top_k", f"must be a positive integer, got {top_k!r}")
    price = None
    if not isinstance(scenario, Scenario):
        price = price_per_gpu_hour(scenario)
        scenario = validate_scenario(scenario)
    if objective == "cost" and price is None:
        raise ScenarioError("cost.price_per_gpu_hour", "is required for objective 'cost'")
    return _Request(with_fitting_framework(scenario), top_k, objective, price)


def with_fitting_framework(scenario: Scenario) -> Scenario:
    """The scenario on the first of its framework and ``framework_fallbacks`` under which
    some layout fits; unchanged when there are no fallbacks or none fits (the search then
    reports why on the framework validation chose).

    A period stack (:data:`~estimator.core.frameworks.LEGACY_FP16_FRAMEWORKS`) resolved
    from ``"auto"`` gives way when nothing fits on it: OPT-175B on 992 A100s (31 x 32
    devices) fits no layout of the 2021 Megatron-LM, which had no sharded optimizer, and
    did run on FSDP. Every chunk of a split search resolves the same way.

    Parameters
    ----------
    scenario : Scenario
        A validated scenario with the layout left to the search.

    Returns
    -------
    Scenario
    """
    if not scenario.framework_fallbacks:
        return scenario
    candidate = scenario
    while not _scan(build_workload(candidate), candidate, 0, grid_size(candidate), 1).fitting:
        if not candidate.framework_fallbacks:
            return scenario
        following = candidate.framework_fallbacks
        candidate = dataclasses.replace(
            candidate,
            framework=following[0],
            framework_fallbacks=following[1:],
            stack=stack_assumed(following[0], False, candidate.cluster.spec.family),
        )
    return candidate


@dataclass(frozen=True)
class _Scan:
    """What a pass over a range of the grid keeps: counts, the best fitting candidates
    (columns with their grid index ``flat``) and the structurally valid layout that needs
    the least memory (empty columns when there is none).
    """

    rejected: dict[str, int]
    fitting: int
    valid: int
    best: dict[str, IntArray]
    best_scores: npt.NDArray[np.float64]
    leanest: dict[str, IntArray]
    leanest_memory: float


def _concat(pieces: list[dict[str, IntArray]]) -> dict[str, IntArray]:
    return {k: np.concatenate([p[k] for p in pieces]) for k in pieces[0]}


def _scan(workload: Workload, scenario: Scenario, start: int, stop: int, keep: int) -> _Scan:
    """Evaluate grid indices [start, stop) block by block, so memory stays bounded."""
    rejected, fitting, valid = dict.fromkeys(REJECTION_REASONS, 0), 0, 0
    pools: list[dict[str, IntArray]] = []
    scores: list[npt.NDArray[np.float64]] = []
    leanest: dict[str, IntArray] = {}
    leanest_memory = float("inf")
    for low in range(start, max(stop, start + 1), BLOCK_LAYOUTS):
        part = structural_slice(scenario, low, min(stop, low + BLOCK_LAYOUTS))
        columns = {**part.columns, "flat": part.flat_index}
        evaluated = _evaluate(workload, part.columns)
        fits = evaluated.total_memory <= workload.usable_memory
        for reason, count in part.rejected.items():
            rejected[reason] += count
        rejected["does_not_fit"] += int(np.count_nonzero(~fits))
        fitting, valid = fitting + int(np.count_nonzero(fits)), valid + len(fits)
        good = np.flatnonzero(fits)
        rows = good[_best_rows(evaluated.seconds_per_token[good], part.flat_index[good], keep)]
        pools.append({k: v[rows] for k, v in columns.items()})
        scores.append(evaluated.seconds_per_token[rows])
        if len(fits) and evaluated.total_memory.min() < leanest_memory:
            row = int(np.argmin(evaluated.total_memory))
            leanest = {k: v[row : row + 1] for k, v in columns.items()}
            leanest_memory = float(evaluated.total_memory[row])
    best, pooled = _concat(pools), np.concatenate(scores)
    rows = _best_rows(pooled, best["flat"], keep)
    best = {k: v[rows] for k, v in best.items()}
    return _Scan(rejected, fitting, valid, best, pooled[rows], leanest, leanest_memory)


def _contenders(scores: npt.NDArray[np.float64], top_k: int) -> IntArray:
    """The kept candidates (``scores`` ascending) that can be among the ``top_k`` best in
    the explicit estimate's order: those within :data:`_TIE_MARGIN` of the top_k-th."""
    if len(scores) <= top_k:
        return np.arange(len(scores))
    cutoff = scores[top_k - 1] * (1.0 + _TIE_MARGIN)
    return np.flatnonzero(scores <= cutoff)


def _search_range(request: _Request, start: int, stop: int) -> dict[str, Any]:
    began = time.perf_counter()
    scenario = request.scenario
    workload = build_workload(scenario)
    scan = _scan(workload, scenario, start, stop, request.top_k + _SLACK)
    results = _estimate_rows(scenario, scan.best, _contenders(scan.best_scores, request.top_k))
    results.sort(key=lambda result: _rank_key(result, request.objective))
    out: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "objective": request.objective,
        "layouts_considered": stop - start,
        "layouts_fitting": scan.fitting,
        "rejected": scan.rejected,
        "seconds": 0.0,
        "results": with_comparisons(
            [_with_cost(r, request.price) for r in results[: request.top_k]]
        ),
    }
    if not out["results"]:
        out["reason"] = _no_layout_reason(workload, scan, stop - start)
    out["seconds"] = time.perf_counter() - began
    return out


def _no_layout_reason(workload: Workload, scan: _Scan, considered: int) -> str:
    if considered == 0:
        return "the grid is empty"
    if scan.valid == 0:
        return (
            f"no layout of {workload.num_gpus} devices divides the model and the global batch "
            f"of {workload.global_batch_size} sequences"
        )
    leanest = scan.leanest_memory / GIB
    within = "" if leanest > workload.spec.memory_gib else " with headroom"
    return (
        f"no layout fits in memory{within}: the leanest needs {leanest:,.1f} GiB "
        f"per device, {workload.spec.id} has {workload.spec.memory_gib:g} GiB of which "
        f"{workload.framework.name} runs use {workload.usable_memory / GIB:,.1f} GiB; "
        "use more or larger devices, or a memory lever"
    )


def search_chunk(
    scenario: Mapping[str, Any] | Scenario,
    chunk_index: int,
    num_chunks: int,
    top_k: int = 5,
    objective: str = "time",
) -> dict[str, Any]:
    """Search slice ``chunk_index`` of ``num_chunks`` equal slices of the grid.

    Slices are independent (for fan-out to workers) and :func:`merge_search_results` of
    all of them equals :func:`search` (``seconds`` aside).

    Parameters
    ----------
    scenario : dict or Scenario
        A scenario in the contract's format, or a validated :class:`Scenario`.
    chunk_index : int
        Which slice, 0 to ``num_chunks`` - 1.
    num_chunks : int
        How many equal slices the grid is cut into.
    top_k : int
        How many layouts to return.
    objective : {"time", "cost"}
        Rank by training days, or by GPU hours (needs a price).

    Returns
    -------
    dict
        The contract's ``search`` output for the slice.

    Raises
    ------
    ScenarioError
        For an invalid scenario, ``chunk_index``, ``top_k`` or ``objective``.
    """
    if not 0 <= chunk_index < num_chunks:
        raise ScenarioError("chunk_index", f"must be in [0, {num_chunks}), got {chunk_index}")
    request = _request(scenario, top_k, objective)
    total = grid_size(request.scenario)
    start, stop = total * chunk_index // num_chunks, total * (chunk_index + 1) // num_chunks
    return _search_range(request, start, stop)


def merge_search_results(parts: list[dict[str, Any]], top_k: int = 5) -> dict[str, Any]:
    """Combine :func:`search_chunk` outputs of one scenario and objective into one.

    Parameters
    ----------
    parts : list of dict
        The outputs of every slice.
    top_k : int
        How many layouts to keep.

    Returns
    -------
    dict
        The contract's ``search`` output: counts summed, the ``top_k`` best results, and
        a ``reason`` when no slice found a layout.
    """
    objective = parts[0]["objective"] if parts else "time"
    rejected = dict.fromkeys(REJECTION_REASONS, 0)
    for part in parts:
        for reason, count in part["rejected"].items():
            rejected[reason] = rejected.get(reason, 0) + count
    results = sorted(
        (result for part in parts for result in part["results"]),
        key=lambda result: _rank_key(result, objective),
    )
    merged: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "objective": objective,
        "layouts_considered": sum(p["layouts_considered"] for p in parts),
        "layouts_fitting": sum(p["layouts_fitting"] for p in parts),
        "rejected": rejected,
        "seconds": sum(p["seconds"] for p in parts),
        "results": with_comparisons(results[:top_k]),
    }
    if not merged["results"]:
        reasons = [p["reason"] for p in parts if "reason" in p]
        merged["reason"] = _merged_reason(reasons, merged["layouts_fitting"])
    return merged


def _merged_reason(reasons: list[str], fitting: int) -> str:
    memory = [r for r in reasons if r.startswith("no layout fits")]
    if fitting == 0 and memory:
        return memory[0]
    return reasons[0] if reasons else "no layout found"


def search(
    scenario: Mapping[str, Any] | Scenario, top_k: int = 5, objective: str = "time"
) -> dict[str, Any]:
    """The ``top_k`` best layouts of a scenario that fit in memory, best first.

    Parameters
    ----------
    scenario : dict or Scenario
        A scenario in the contract's format; its ``parallelism`` is ignored (usually
        ``"auto"``). ``cost.price_per_gpu_hour`` (optional) prices the results.
    top_k : int
        How many layouts to return.
    objective : {"time", "cost"}
        Rank by training days, or by GPU hours (needs a price); see the module docstring.

    Returns
    -------
    dict
        The contract's ``search`` output; ``results`` are full ``estimate`` outputs. When no
        layout fits, ``results`` is empty and ``reason`` says why.
    """
    request = _request(scenario, top_k, objective)
    return _search_range(request, 0, grid_size(request.scenario))


#: Runners-up an ``"auto"`` estimate shows, and the pool of best layouts they come from.
ALTERNATIVES = 3
ALTERNATIVE_POOL = 64


def _distinct_rows(columns: Mapping[str, IntArray], head: int, extra: int) -> IntArray:
    """The first ``head`` rows (best first), then up to ``extra`` more whose layout differs
    from every row kept in more than the micro-batch size, so runners-up are real choices."""
    shapes = [name for name in (*AXES, "dp") if name != "micro_batch_size"]
    keys = [tuple(int(columns[n][i]) for n in shapes) for i in range(len(columns["flat"]))]
    rows, seen = list(range(min(head, len(keys)))), set(keys[:head])
    for i in range(head, len(keys)):
        if len(rows) >= head + extra:
            break
        if keys[i] not in seen:
            rows.append(i)
            seen.add(keys[i])
    return np.asarray(rows, dtype=np.int64)


def estimate_auto(scenario: Scenario, price: float | None = None) -> dict[str, Any]:
    """``estimate`` for ``parallelism: "auto"``: the fastest layout that fits.

    When none fits, the structurally valid layout that needs the least memory is returned
    (``fits_in_memory`` false, with the search's reason as a warning).

    Parameters
    ----------
    scenario : Scenario
        A validated scenario whose ``parallelism`` is None.
    price : float, optional
        ``cost.price_per_gpu_hour``, which prices the result. [currency/h]

    Returns
    -------
    dict
        The contract's ``estimate`` output of the chosen layout, with ``alternatives``
        (the runners-up) when a layout fits.

    Raises
    ------
    ScenarioError
        Naming ``parallelism`` when no layout divides the cluster at all.
    """
    scenario = with_fitting_framework(scenario)
    workload = build_workload(scenario)
    scan = _scan(workload, scenario, 0, grid_size(scenario), ALTERNATIVE_POOL)
    if scan.fitting:
        rows = _distinct_rows(scan.best, 1 + _SLACK, ALTERNATIVES)
        results = _estimate_rows(scenario, scan.best, rows)
        results.sort(key=lambda result: _rank_key(result, "time"))
        best = _with_cost(results[0], price)
        best["alternatives"] = alternatives(best, results[1:], ALTERNATIVES)
        return best
    reason = _no_layout_reason(workload, scan, grid_size(scenario))
    if scan.valid == 0:
        raise ScenarioError("parallelism", reason)
    best = _estimate_rows(scenario, scan.leanest, np.arange(1))[0]
    # The search's reason says it of every layout; the leanest's own note would repeat it.
    notes = [text for text in best["warnings"] if not text.startswith(DOES_NOT_FIT_NOTE)]
    best["warnings"] = [reason, *notes]
    return _with_cost(best, price)
