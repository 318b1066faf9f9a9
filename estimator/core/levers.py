"""Levers: single changes to a scenario that make its run cheaper or faster.

Each lever is the scenario with one thing changed - the precision, the recomputation mode,
the micro-batch size (and with it the gradient accumulation), the ZeRO stage, the pipeline
schedule or its interleaving, sequence parallelism, the vocabulary padded to the matmul
tile, the search's next best layouts, half or double the cluster - evaluated with the same
model as the baseline (:func:`~estimator.core.estimate.estimate`): a lever's figures are
exactly ``estimate(lever["scenario"])``. A change the validator refuses for this scenario
(fp8 on an accelerator without it, a micro-batch that does not divide the batch) is not a
lever. Levers come best first: those that fit in memory before those that do not, then by
GPU-hours saved.

A scenario whose layout is ``"auto"`` is changed on the layout the search chose (made
explicit), except for the changes that concern the model, the precision or the cluster,
which leave the search to choose again. A scenario with a measured speed
(:mod:`estimator.core.measurement`) keeps it tied to the configuration it was measured on,
so each lever moves the measured figures by what the model says the change is worth.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

from estimator.core.catalog import load_catalog
from estimator.core.errors import ScenarioError
from estimator.core.estimate import estimate
from estimator.core.measurement import measurement_pinned
from estimator.core.memory import FITS, result_memory_verdict
from estimator.core.memory_levers import memory_candidates
from estimator.core.search import search

#: The matmul tile a padded dimension is rounded up to (tensor-core GPUs; see compute.py).
TILE = 128
#: Runners-up of the search offered as levers.
NEXT_LAYOUTS = 3
RECOMPUTE_MODES = ("none", "selective", "full")
ZERO_STAGES = (0, 1, 2, 3)

Scenario = dict[str, Any]
Candidate = tuple[str, str, Scenario]  # kind, change in words, the changed scenario


def _share(result: Mapping[str, Any], component: str) -> float:
    breakdown = result["time_per_step_breakdown_s"]
    return float(breakdown.get(component, 0.0)) / float(result["step_time_s"])


def _share_text(label: str, before: Mapping[str, Any], after: Mapping[str, Any], key: str) -> str:
    old, new = round(100 * _share(before, key)), round(100 * _share(after, key))
    if old == new:
        return f"{label} stays at {old} % of step time"
    verb = "falls" if new < old else "rises"
    return f"{label} {verb} from {old} % to {new} % of step time"


def _seconds(result: Mapping[str, Any], component: str) -> float:
    return float(result["time_per_step_breakdown_s"].get(component, 0.0))


def _memory(result: Mapping[str, Any]) -> float:
    return float(result["memory_per_gpu_gib"]["total"])


def _reason(kind: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """One line from the model on why the lever moves the figures."""
    if kind == "recompute":
        text = _share_text("recomputation", before, after, "recompute")
    elif kind in ("schedule", "micro_batch"):
        text = _share_text("pipeline bubble", before, after, "pp_bubble")
        if kind == "micro_batch":
            text = (
                f"{before['num_micro_batches']} -> {after['num_micro_batches']} micro-batches "
                f"a step; {text}"
            )
    elif kind == "zero":
        text = (
            f"memory {_memory(before):.1f} -> {_memory(after):.1f} GiB per device; "
            + _share_text("exposed communication", before, after, "exposed_communication")
        )
    elif kind == "sequence_parallel":
        text = (
            f"memory {_memory(before):.1f} -> {_memory(after):.1f} GiB per device; "
            + _share_text("tensor-parallel communication", before, after, "tp_communication")
        )
    elif kind in ("precision", "padding"):
        text = (
            f"compute {_seconds(before, 'compute'):.3g} s -> {_seconds(after, 'compute'):.3g} s "
            f"a step; MFU {100 * before['mfu']:.1f} % -> {100 * after['mfu']:.1f} %"
        )
    elif kind == "cluster":
        text = (
            f"{before['tokens_per_s_per_gpu']:,.0f} -> {after['tokens_per_s_per_gpu']:,.0f} "
            f"tokens/s per device; "
            + _share_text("exposed communication", before, after, "exposed_communication")
        )
    elif kind == "memory":
        verdict = result_memory_verdict(after).replace("_", " ")
        text = f"memory {_memory(before):.1f} -> {_memory(after):.1f} GiB per device: {verdict}"
        text += f"; step {before['step_time_s']:.3g} s -> {after['step_time_s']:.3g} s"
    else:  # a runner-up layout of the search
        text = (
            f"step {before['step_time_s']:.3g} s -> {after['step_time_s']:.3g} s; "
            f"memory {_memory(before):.1f} -> {_memory(after):.1f} GiB per device"
        )
    if after["framework"]["id"] != before["framework"]["id"]:
        # "auto" resolves per scenario: fp16 -> bf16, or a recompute mode the 2021 stack
        # lacks, moves the estimate onto another framework (and its attention kernel).
        text += f"; runs on {after['framework']['name']} instead of {before['framework']['name']}"
    if not after["fits_in_memory"]:
        text += (
            f"; does not fit: needs {_memory(after):.1f} GiB of "
            f"{after['accelerator_memory_gib']:.0f} GiB"
        )
    return text


def _with(scenario: Mapping[str, Any], section: str, **values: Any) -> Scenario:
    changed = copy.deepcopy(dict(scenario))
    changed[section] = {**changed[section], **values}
    return changed


def _layout_text(layout: Mapping[str, Any]) -> str:
    parts = [f"{axis} {layout[axis]}" for axis in ("tp", "pp", "dp", "cp", "ep") if axis in layout]
    if int(layout.get("pp", 1)) > 1:
        schedule = layout.get("pipeline_schedule", "1f1b")
        virtual = int(layout.get("virtual_stages", 1))
        parts.append(f"interleaved x{virtual}" if schedule == "interleaved" else "1F1B")
    if int(layout.get("tp", 1)) > 1:
        parts.append("sequence parallel" if layout.get("sequence_parallel") else "no SP")
    parts.append(f"micro-batch {layout.get('micro_batch_size')}")
    parts.append(f"ZeRO {layout.get('zero_stage')}")
    parts.append(f"recompute {layout.get('recompute')}")
    if layout.get("activation_offload"):
        parts.append("activation offload")
    return ", ".join(parts)


def _precision_candidates(scenario: Scenario) -> Iterator[Candidate]:
    current = scenario["training"].get("precision", "bf16")
    peaks = load_catalog()[scenario["cluster"]["accelerator"]].peak_tflops
    for target in ("bf16", "fp8"):
        if target != current and target in peaks:
            yield (
                "precision",
                f"precision: {current} -> {target}",
                _with(scenario, "training", precision=target),
            )


def _padding_candidates(scenario: Scenario) -> Iterator[Candidate]:
    vocab = int(scenario["model"]["vocab_size"])
    padded = -(-vocab // TILE) * TILE
    if padded != vocab:
        yield (
            "padding",
            f"vocabulary: {vocab:,} -> {padded:,} (a multiple of {TILE})",
            _with(scenario, "model", vocab_size=padded),
        )


def _cluster_candidates(
    scenario: Scenario, layout: Mapping[str, Any] | None
) -> Iterator[Candidate]:
    gpus = int(scenario["cluster"]["num_gpus"])
    for factor, word in ((0.5, "half"), (2.0, "double")):
        size = int(gpus * factor)
        if size < 1 or size * 1.0 != gpus * factor:
            continue
        changed = _with(scenario, "cluster", num_gpus=size)
        if layout is not None:  # a stated layout: the data-parallel size follows the cluster
            dp = layout["dp"] * factor
            if dp < 1 or dp != int(dp):
                continue
            changed["parallelism"] = {**layout, "dp": int(dp)}
        yield "cluster", f"cluster: {gpus:,} -> {size:,} ({word})", changed


def _layout_candidates(
    scenario: Scenario, layout: Mapping[str, Any], supports: Mapping[str, Any]
) -> Iterator[Candidate]:
    """Single changes of the layout; ``supports`` is the framework's (the estimate's
    ``framework.supports``): no sequence-parallel lever on a stack without it."""

    def changed(**values: Any) -> Scenario:
        return {**copy.deepcopy(scenario), "parallelism": {**layout, **values}}

    for mode in RECOMPUTE_MODES:
        if mode != layout.get("recompute"):
            yield (
                "recompute",
                f"recompute: {layout.get('recompute')} -> {mode}",
                changed(recompute=mode),
            )
    micro = int(layout["micro_batch_size"])
    for size in (micro * 2, micro // 2):
        if size >= 1 and size != micro:
            yield "micro_batch", f"micro-batch: {micro} -> {size}", changed(micro_batch_size=size)
    for stage in ZERO_STAGES:
        if stage != layout.get("zero_stage"):
            yield (
                "zero",
                f"ZeRO stage: {layout.get('zero_stage')} -> {stage}",
                changed(zero_stage=stage),
            )
    if int(layout.get("pp", 1)) > 1:
        schedule = layout.get("pipeline_schedule", "1f1b")
        virtual = int(layout.get("virtual_stages", 1))
        if schedule == "interleaved":
            yield (
                "schedule",
                "pipeline schedule: interleaved -> 1F1B",
                changed(pipeline_schedule="1f1b", virtual_stages=1),
            )
            yield (
                "schedule",
                f"interleaving: {virtual} -> {virtual * 2} virtual stages",
                changed(virtual_stages=virtual * 2),
            )
        else:
            yield (
                "schedule",
                "pipeline schedule: 1F1B -> interleaved (2 virtual stages)",
                changed(pipeline_schedule="interleaved", virtual_stages=2),
            )
    if int(layout.get("tp", 1)) > 1 and supports["sequence_parallel"]:
        on = bool(layout.get("sequence_parallel", False))
        yield (
            "sequence_parallel",
            f"sequence parallelism: {'on -> off' if on else 'off -> on'}",
            (changed(sequence_parallel=not on)),
        )


def _search_candidates(scenario: Scenario, chosen: Mapping[str, Any]) -> Iterator[Candidate]:
    found = search({**scenario, "parallelism": "auto"}, top_k=NEXT_LAYOUTS + 1)
    offered = 0
    for rank, result in enumerate(found["results"], start=1):
        layout = result["parallelism"]
        if layout == chosen or offered == NEXT_LAYOUTS:
            continue
        offered += 1
        yield (
            "layout",
            f"layout #{rank} of the search: {_layout_text(layout)}",
            {**copy.deepcopy(scenario), "parallelism": layout},
        )


def _candidates(scenario: Scenario, baseline: Mapping[str, Any]) -> Iterator[Candidate]:
    stated = scenario["parallelism"] if isinstance(scenario["parallelism"], Mapping) else None
    chosen = dict(baseline["parallelism"])
    explicit = {**scenario, "parallelism": chosen}
    yield from memory_candidates(scenario, baseline)  # first: a shared change counts as memory
    yield from _precision_candidates(scenario)
    yield from _padding_candidates(scenario)
    yield from _layout_candidates(explicit, chosen, baseline["framework"]["supports"])
    yield from _search_candidates(scenario, chosen)
    yield from _cluster_candidates(scenario, stated)


def _rank(lever: Mapping[str, Any]) -> tuple[bool, bool, float]:
    """Those that fit first, then those that make a run that did not fit fit, then by
    GPU-hours saved (largest first)."""
    return (not lever["fits_in_memory"], not lever["makes_it_fit"], -lever["gpu_hours_saved"])


def levers(scenario: Mapping[str, Any]) -> dict[str, Any]:
    """The single changes to ``scenario`` and what each does, best first.

    Parameters
    ----------
    scenario : mapping
        A scenario in the contract's format (``parallelism`` stated or ``"auto"``).

    Returns
    -------
    dict
        ``format_version``, ``baseline`` (the estimate of ``scenario``) and ``levers``: each
        ``change`` (in words), ``kind``, ``scenario`` (the whole changed scenario, valid
        input for ``estimate``), ``training_days``, ``gpu_hours``, ``mfu``,
        ``fits_in_memory``, ``memory_verdict``, ``makes_it_fit`` (the baseline is not a plain
        fit and the lever is), ``memory_total_gib``, ``step_time_s``, ``gpu_hours_saved``,
        ``training_days_saved`` and a one-line ``reason``. Fitting levers first, then those
        that make it fit, then by GPU-hours saved (largest first). A run that does not fit,
        or is tight, also gets the memory levers (:mod:`estimator.core.memory_levers`).

    Raises
    ------
    ScenarioError
        When ``scenario`` itself is invalid (naming the key).
    """
    baseline = estimate(scenario)
    # A measured speed stays tied to the configuration it was measured on.
    pinned = measurement_pinned(scenario, baseline)
    found: list[dict[str, Any]] = []
    seen: list[Scenario] = []
    fixes = result_memory_verdict(baseline) != FITS  # a lever can make it fit
    for kind, change, changed in _candidates(pinned, baseline):
        if changed in seen:
            continue
        seen.append(changed)
        try:
            result = estimate(changed)
        except ScenarioError:
            continue  # not a change this scenario can make
        found.append(
            {
                "change": change,
                "kind": kind,
                "scenario": changed,
                "training_days": result["training_days"],
                "gpu_hours": result["gpu_hours"],
                "mfu": result["mfu"],
                "fits_in_memory": result["fits_in_memory"],
                "memory_verdict": result_memory_verdict(result),
                "makes_it_fit": fixes and result_memory_verdict(result) == FITS,
                "memory_total_gib": _memory(result),
                "step_time_s": result["step_time_s"],
                "gpu_hours_saved": baseline["gpu_hours"] - result["gpu_hours"],
                "training_days_saved": baseline["training_days"] - result["training_days"],
                "reason": _reason(kind, baseline, result),
            }
        )
    found.sort(key=_rank)
    return {"format_version": 1, "baseline": baseline, "levers": found}
