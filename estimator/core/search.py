"""Layout search: every valid parallel layout of a scenario, evaluated at once, best first.

Every rule is a predicate of :mod:`estimator.core.layout_rules`, the module the validator
and the estimate's warnings call too, evaluated here on whole arrays of candidates. The
grid is the Cartesian product of per-axis candidates (each axis already filtered by the
rules that involve only the model):

* ``tp``: powers of two up to the cluster size that divide the attention heads and divide,
  or are a multiple of, the KV heads (``tp_divides_heads``, ``tp_fits_kv_heads``). Groups
  wider than a node are kept; their estimates warn that the collectives cross the
  scale-out network.
* ``pp``: divisors of ``num_layers``, ``num_layers + 1`` and ``num_layers + 2`` and powers
  of two, up to the cluster size; stages hold k = ceil(l / pp) layers, the first and last
  fewer (``pipeline_ends_absorb``; :func:`estimator.core.pipeline.pipeline_split`).
* ``cp``: 1, and powers of two with ``seq_len`` divisible by 2 cp (ring attention splits
  the sequence into 2 cp chunks for load balance) and at least 2,048 tokens per rank
  (``cp_balanced``).
* ``ep``: 1 for dense models; divisors of ``num_experts`` for MoE (``ep_divides_experts``).
* ``micro_batch_size``: divisors of ``global_batch_size``.
* ZeRO stage 0-3, recompute none/selective/full, sequence parallelism whenever tp > 1 and
  the profile has it.
* ``virtual_stages``: 1 (1F1B) or v > 1 (interleaved), from the divisors of ``num_layers``,
  ``num_layers + 1`` and ``num_layers + 2``.

An axis the framework profile does not run keeps only 1 (``framework_runs_axis``).
Rules that tie axes together reject a layout with a reason: ``gpus_indivisible`` (tp pp cp
does not divide the cluster: ``fills_devices``), ``experts_indivisible`` (ep does not
divide dp cp: ``ep_divides_data``), ``batch_indivisible`` (dp b does not divide the global
batch: ``batch_divides``), ``schedule`` (interleaving needs pp > 1, v dividing the k layers
of a stage, at most two layers missing at the ends, and micro-batches divisible by pp, as
in Megatron-LM: ``interleaving_has_pipeline``, ``interleaved_chunks_even``,
``interleaved_micro_batches_divide``) and ``does_not_fit`` (memory beyond the framework
profile's usable share). Each rejected layout counts once, under the first rule it breaks,
so ``layouts_considered = layouts_fitting + sum(rejected)``. Every layout kept passes
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

from estimator.core import layout_rules as rules
from estimator.core.compare import alternatives, with_comparisons
from estimator.core.errors import ScenarioError
from estimator.core.explicit import FORMAT_VERSION, estimate_scenario
from estimator.core.frameworks import FrameworkProfile, profile_for, stack_assumed
from estimator.core.layout import evaluate_layouts
from estimator.core.layout_arrays import Layouts
from estimator.core.memory import GIB, RECOMPUTE_CODES
from estimator.core.scenario import RECOMPUTE_MODES, ParallelismConfig, Scenario
from estimator.core.validation import price_per_gpu_hour, validate_scenario
from estimator.core.workload import Workload, build_workload

OBJECTIVES = ("time", "cost")
#: Layouts evaluated per evaluate_layouts call, bounding temporary memory (~0.5 GB).
CHUNK_LAYOUTS = 1 << 18
#: Grid indices decoded and filtered at a time.
BLOCK_LAYOUTS = 1 << 20
#: Extra candidates estimated beyond top_k so that ties and rounding cannot change the order.
_SLACK = 8
AXES = ("tp", "pp", "cp", "ep", "micro_batch_size", "zero_stage", "recompute", "virtual_stages")
REJECTION_REASONS = (
    "gpus_indivisible",
    "experts_indivisible",
    "batch_indivisible",
    "schedule",
    "does_not_fit",
)

IntArray = npt.NDArray[np.int64]


def _divisors(number: int, limit: int) -> list[int]:
    return [d for d in range(1, min(number, limit) + 1) if number % d == 0]


def _powers_of_two(limit: int) -> IntArray:
    return np.asarray([1 << k for k in range(limit.bit_length()) if 1 << k <= limit], np.int64)


def _tp_candidates(scenario: Scenario) -> IntArray:
    model, sizes = scenario.model, _powers_of_two(scenario.cluster.num_gpus)
    keep = rules.tp_divides_heads(model.num_attention_heads, sizes) & rules.tp_fits_kv_heads(
        model.num_kv_heads, sizes
    )
    return sizes[keep]


def _cp_candidates(scenario: Scenario) -> IntArray:
    sizes = _powers_of_two(scenario.cluster.num_gpus)
    return sizes[rules.cp_balanced(scenario.model.seq_len, sizes)]


def _pp_candidates(num_layers: int, gpus: int) -> IntArray:
    """Stage counts: divisors of l, l + 1 and l + 2 (the embedding and the loss counted as
    layers) and powers of two, whose uneven split
    (:func:`~estimator.core.pipeline.pipeline_split`) exists
    (:func:`~estimator.core.layout_rules.pipeline_ends_absorb`)."""
    limit = min(num_layers, gpus)
    found = {d for n in range(num_layers, num_layers + 3) for d in _divisors(n, limit)}
    sizes = np.asarray(sorted(found | set(_powers_of_two(limit).tolist())), dtype=np.int64)
    return sizes[rules.pipeline_ends_absorb(num_layers, sizes)]


def _virtual_candidates(num_layers: int) -> list[int]:
    """Model chunks per device: divisors of l, l + 1 and l + 2 (see :func:`_pp_candidates`)."""
    return sorted({d for n in range(num_layers, num_layers + 3) for d in _divisors(n, n)})


def _ep_candidates(num_experts: int, gpus: int) -> IntArray:
    sizes = np.arange(1, min(num_experts, gpus) + 1, dtype=np.int64)
    return sizes[rules.ep_divides_experts(num_experts, sizes)]


def _within_profile(profile: FrameworkProfile, axis: str, sizes: Any) -> IntArray:
    """The candidate ``sizes`` of ``axis`` that the framework runs."""
    sizes = np.asarray(sizes, dtype=np.int64)
    return sizes[rules.framework_runs_axis(profile, axis, sizes)]


def grid_axes(scenario: Scenario) -> dict[str, IntArray]:
    """Per-axis candidate values of the search grid, within what the scenario's framework
    profile runs (:mod:`estimator.core.frameworks`).

    Parameters
    ----------
    scenario : Scenario
        A validated scenario (its ``parallelism`` is ignored).

    Returns
    -------
    dict of str to array of int
        The candidates of each of :data:`AXES`, each filtered by the rules of
        :mod:`estimator.core.layout_rules` that involve that axis alone (see the module
        docstring).
    """
    model, gpus = scenario.model, scenario.cluster.num_gpus
    experts = model.moe.num_experts if model.moe is not None else 1
    profile = profile_for(scenario.framework, scenario.cluster.spec.family)
    axes = {
        "tp": _within_profile(profile, "tp", _tp_candidates(scenario)),
        "pp": _within_profile(profile, "pp", _pp_candidates(model.num_layers, gpus)),
        "cp": _within_profile(profile, "cp", _cp_candidates(scenario)),
        "ep": _within_profile(profile, "ep", _ep_candidates(experts, gpus)),
        "micro_batch_size": _divisors(scenario.training.global_batch_size, 1 << 40),
        "zero_stage": list(profile.zero_stages),
        "recompute": [RECOMPUTE_CODES[m] for m in RECOMPUTE_MODES if m in profile.recompute],
        "virtual_stages": _within_profile(
            profile, "virtual_stages", _virtual_candidates(model.num_layers)
        ),
    }
    return {name: np.asarray(values, dtype=np.int64) for name, values in axes.items()}


def grid_size(scenario: Scenario) -> int:
    """Number of layouts in the whole grid (``layouts_considered`` of :func:`search`).

    Parameters
    ----------
    scenario : Scenario
        A validated scenario.

    Returns
    -------
    int
        The product of the candidate counts of every axis of :func:`grid_axes`.
    """
    return int(np.prod([len(v) for v in grid_axes(scenario).values()]))


@dataclass(frozen=True)
class _Slice:
    """The layouts of one slice of the grid that pass the structural rules."""

    flat_index: IntArray
    columns: dict[str, IntArray]
    rejected: dict[str, int]


def _decode(axes: dict[str, IntArray], flat: IntArray) -> dict[str, IntArray]:
    shape = tuple(len(axes[name]) for name in AXES)
    positions = np.unravel_index(flat, shape)
    return {name: axes[name][pos] for name, pos in zip(AXES, positions, strict=True)}


def _structural_reasons(scenario: Scenario, columns: dict[str, IntArray]) -> IntArray:
    """Index into REJECTION_REASONS of the first rule each layout breaks; -1 when none."""
    gpus, batch = scenario.cluster.num_gpus, scenario.training.global_batch_size
    tp, pp, cp, virtual = columns["tp"], columns["pp"], columns["cp"], columns["virtual_stages"]
    micro_batch = columns["micro_batch_size"]
    # dp >= 1 keeps the later rules free of divisions by zero where tp pp cp > gpus.
    dp = np.maximum(rules.data_parallel_size(gpus, tp, pp, cp), 1)
    micro_batches = rules.micro_batches_per_step(batch, dp, micro_batch)
    schedule = (
        rules.interleaving_has_pipeline(pp, virtual)
        & rules.interleaved_chunks_even(scenario.model.num_layers, pp, virtual)
        & rules.interleaved_micro_batches_divide(micro_batches, pp, virtual)
    )
    rules_kept = [
        rules.fills_devices(gpus, tp, pp, dp, cp),
        rules.ep_divides_data(dp, cp, columns["ep"]),
        rules.batch_divides(batch, dp, micro_batch),
        schedule,
    ]
    reason = np.full(tp.shape, -1, dtype=np.int64)
    for code in range(len(rules_kept) - 1, -1, -1):
        reason = np.where(rules_kept[code], reason, code)
    return reason


def _structural_slice(scenario: Scenario, start: int, stop: int) -> _Slice:
    axes = grid_axes(scenario)
    flat = np.arange(start, stop, dtype=np.int64)
    columns = _decode(axes, flat)
    reason = _structural_reasons(scenario, columns)
    counts = np.bincount(reason[reason >= 0], minlength=len(REJECTION_REASONS))
    rejected = {name: int(c) for name, c in zip(REJECTION_REASONS, counts, strict=True)}
    keep = reason < 0
    kept = {name: values[keep] for name, values in columns.items()}
    dp = rules.data_parallel_size(scenario.cluster.num_gpus, kept["tp"], kept["pp"], kept["cp"])
    kept["dp"] = np.asarray(dp, dtype=np.int64)
    return _Slice(flat[keep], kept, rejected)


def layouts_from_columns(
    columns: Mapping[str, IntArray], sequence_parallel: bool = True
) -> Layouts:
    """The :class:`Layouts` of integer grid columns (sequence parallel whenever tp > 1).

    Parameters
    ----------
    columns : dict of str to array of int
        One array per name of :data:`AXES`, plus ``dp``, one entry per layout.

    Returns
    -------
    Layouts
        The same layouts as float arrays, for :func:`~estimator.core.layout.evaluate_layouts`.
    """
    floats = {name: np.asarray(values, dtype=np.float64) for name, values in columns.items()}
    return Layouts.from_arrays(
        tp=floats["tp"],
        pp=floats["pp"],
        dp=floats["dp"],
        cp=floats["cp"],
        ep=floats["ep"],
        micro_batch_size=floats["micro_batch_size"],
        zero_stage=floats["zero_stage"],
        recompute=floats["recompute"],
        sequence_parallel=(floats["tp"] > 1) & sequence_parallel,
        virtual_stages=floats["virtual_stages"],
        activation_offload=0.0,
    )


def layout_config(
    columns: Mapping[str, IntArray], row: int, sequence_parallel: bool = True
) -> ParallelismConfig:
    """Row ``row`` of the grid columns as an explicit :class:`ParallelismConfig`.

    Parameters
    ----------
    columns : dict of str to array of int
        One array per name of :data:`AXES`, plus ``dp``.
    row : int
        The layout's index in the arrays.

    Returns
    -------
    ParallelismConfig
        The layout, interleaved when it has more than one virtual stage.
    """
    value = {name: int(columns[name][row]) for name in (*AXES, "dp")}
    return ParallelismConfig(
        tp=value["tp"],
        pp=value["pp"],
        dp=value["dp"],
        cp=value["cp"],
        ep=value["ep"],
        micro_batch_size=value["micro_batch_size"],
        zero_stage=value["zero_stage"],
        recompute=RECOMPUTE_MODES[value["recompute"]],
        sequence_parallel=value["tp"] > 1 and sequence_parallel,
        pipeline_schedule="interleaved" if value["virtual_stages"] > 1 else "1f1b",
        virtual_stages=value["virtual_stages"],
    )


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
        result["cost"] = {"price_per_gpu_hour": price, "total": result["gpu_hours"] * price}
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
        part = _structural_slice(scenario, low, min(stop, low + BLOCK_LAYOUTS))
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
    best = _concat(pools)
    best = {k: v[_best_rows(np.concatenate(scores), best["flat"], keep)] for k, v in best.items()}
    return _Scan(rejected, fitting, valid, best, leanest, leanest_memory)


def _search_range(request: _Request, start: int, stop: int) -> dict[str, Any]:
    began = time.perf_counter()
    scenario = request.scenario
    workload = build_workload(scenario)
    scan = _scan(workload, scenario, start, stop, request.top_k + _SLACK)
    results = _estimate_rows(scenario, scan.best, np.arange(len(scan.best["flat"])))
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
    return (
        f"no layout fits in memory: the leanest needs {scan.leanest_memory / GIB:,.0f} GiB "
        f"per device, {workload.spec.id} has {workload.spec.memory_gib:g} GiB of which "
        f"{workload.framework.name} runs use {workload.usable_memory / GIB:,.0f} GiB; "
        "use more or larger devices"
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
    best["warnings"].insert(0, reason)
    return _with_cost(best, price)
