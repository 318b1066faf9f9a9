"""The layout search's grid: every candidate layout of a scenario, and the rules that
reject one before it is evaluated.

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
batch: ``batch_divides``) and ``schedule`` (interleaving needs pp > 1, v dividing the k
layers of a stage, at most two layers missing at the ends, and micro-batches divisible by
pp, as in Megatron-LM: ``interleaving_has_pipeline``, ``interleaved_chunks_even``,
``interleaved_micro_batches_divide``); the search adds ``does_not_fit``
(:mod:`estimator.core.search`). The grid is one flat index space, so a slice of it is a
range of indices (:func:`structural_slice`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from estimator.core import layout_rules as rules
from estimator.core.frameworks import FrameworkProfile, profile_for
from estimator.core.layout_arrays import Layouts
from estimator.core.memory import RECOMPUTE_CODES
from estimator.core.scenario import RECOMPUTE_MODES, ParallelismConfig, Scenario

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
    """The divisors of ``number`` up to ``limit``, ascending: pairs (d, number / d) for d up
    to the square root, so a batch of 16M sequences takes 4,096 trials, not 16M."""
    small = [d for d in range(1, math.isqrt(number) + 1) if number % d == 0]
    every = small + [number // d for d in reversed(small) if d * d != number]
    return [d for d in every if d <= limit]


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
    """Number of layouts in the whole grid (``layouts_considered`` of
    :func:`~estimator.core.search.search`).

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


def _decode(
    axes: dict[str, IntArray], start: int, stop: int, names: tuple[str, ...] = AXES
) -> dict[str, IntArray]:
    """Each axis's value at the indices start..stop - 1 of the grid of ``names`` (C order,
    the last fastest): ``np.unravel_index`` of the range and a look-up per axis, built
    instead by repeating and tiling each axis over the blocks the range covers (~10x
    faster)."""
    columns = {}
    inner = 1  # layouts per step of the axis: the product of the lengths after it
    for name in reversed(names):
        block = inner * len(axes[name])
        first, last = start // block, max(stop - 1, start) // block
        column = np.tile(np.repeat(axes[name], inner), last - first + 1)
        offset = start - first * block
        columns[name] = column[offset : offset + stop - start]
        inner = block
    return {name: columns[name] for name in names}


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


#: The axes no structural rule reads (:func:`_structural_reasons`): a layout's verdict is
#: that of its other axes, whatever these are. They lie between the last-but-one and the
#: last axis of :data:`AXES`.
_FREE_AXES = ("zero_stage", "recompute")
_RULED_AXES = tuple(name for name in AXES if name not in _FREE_AXES)
assert AXES[-1 - len(_FREE_AXES) : -1] == _FREE_AXES, "structural_slice's index arithmetic"


def structural_slice(scenario: Scenario, start: int, stop: int) -> _Slice:
    """The layouts at grid indices start..stop - 1 that pass the structural rules, with
    how many each rule rejected.

    The rules are judged once per combination of the axes they read (:data:`_RULED_AXES`,
    a grid ``len(zero_stage) x len(recompute)`` times smaller) and each index of the range
    takes its combination's verdict; only the kept layouts' columns are built. The result
    is the same as decoding every index and judging it (``tests/estimator/core``).
    """
    axes = grid_axes(scenario)
    free = int(np.prod([len(axes[name]) for name in _FREE_AXES]))
    last = len(axes[AXES[-1]])
    ruled_size = int(np.prod([len(axes[name]) for name in _RULED_AXES]))
    ruled = _decode(axes, 0, ruled_size, _RULED_AXES)
    ruled_reason = _structural_reasons(scenario, ruled)
    # Grid index = (outer x free + middle) x last + inner, in C order over AXES: the outer
    # axes come before the free ones, the last axis after them.
    if start == 0 and stop == ruled_size * free:  # the whole grid: only the kept indices
        kept_3d = np.broadcast_to(
            (ruled_reason < 0).reshape(-1, 1, last), (ruled_size // last, free, last)
        )
        outer, kept_middle, inner = (np.asarray(i, dtype=np.int64) for i in np.nonzero(kept_3d))
        kept_combination = outer * last + inner
        kept_flat = (outer * free + kept_middle) * last + inner
        judged = ruled_reason[ruled_reason >= 0]
        counts = np.bincount(judged, minlength=len(REJECTION_REASONS)) * free
    else:
        flat = np.arange(start, stop, dtype=np.int64)
        outer, rest = np.divmod(flat, free * last)
        middle, inner = np.divmod(rest, last)
        combination = outer * last + inner
        reason = ruled_reason[combination]
        counts = np.bincount(reason[reason >= 0], minlength=len(REJECTION_REASONS))
        keep = reason < 0
        kept_flat, kept_combination, kept_middle = flat[keep], combination[keep], middle[keep]
    rejected = {name: int(c) for name, c in zip(REJECTION_REASONS, counts, strict=True)}
    free_columns = _decode(axes, 0, free, _FREE_AXES)
    kept = {
        name: (
            free_columns[name][kept_middle] if name in _FREE_AXES else ruled[name][kept_combination]
        )
        for name in AXES
    }
    dp = rules.data_parallel_size(scenario.cluster.num_gpus, kept["tp"], kept["pp"], kept["cp"])
    kept["dp"] = np.asarray(dp, dtype=np.int64)
    return _Slice(kept_flat, kept, rejected)


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
