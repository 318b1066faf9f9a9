"""``estimate(scenario) -> dict``: the contract's output for one explicit layout."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from estimator.core import finetune, memory
from estimator.core.calibration import FAMILY_EFFICIENCY
from estimator.core.errors import ScenarioError
from estimator.core.layout import LayoutResults, Layouts, evaluate_layouts
from estimator.core.memory import GIB
from estimator.core.scenario import ParallelismConfig, Scenario
from estimator.core.validation import price_per_gpu_hour, validate_scenario
from estimator.core.wholerun import whole_run
from estimator.core.workload import Workload, build_workload

ESTIMATOR_VERSION = "0.1.0"
FORMAT_VERSION = 1
SECONDS_PER_DAY = 86400.0


def _scalar(results: LayoutResults, name: str) -> float:
    return float(getattr(results, name)[0])


def _memory_gib(r: LayoutResults) -> dict[str, float]:
    parts = ("weights", "gradients", "optimizer", "activations", "other")
    out = {p: _scalar(r, p) / GIB for p in parts}
    out["total"] = _scalar(r, "total_memory") / GIB
    return out


def _breakdown(r: LayoutResults) -> dict[str, float]:
    keys = (
        "compute",
        "recompute",
        "tp_communication",
        "pp_bubble",
        "dp_communication",
        "exposed_communication",
        "overheads",
        "framework_overhead",
        "network_jitter",
    )
    return {k: _scalar(r, k) for k in keys}


def _bottleneck(r: LayoutResults) -> str:
    """The largest of compute-bound, memory-bound, communication and bubble time."""
    memory_bound = _scalar(r, "memory_bound")
    candidates = {
        "compute": _scalar(r, "compute") + _scalar(r, "recompute") - memory_bound,
        "memory": memory_bound,
        "communication": _scalar(r, "tp_communication") + _scalar(r, "exposed_communication"),
        "pipeline_bubble": _scalar(r, "pp_bubble"),
    }
    return max(candidates, key=lambda k: candidates[k])


def _warnings(w: Workload, layout: ParallelismConfig, r: LayoutResults) -> list[str]:
    notes: list[str] = []
    md, per_step = w.model, layout.dp * layout.micro_batch_size
    if layout.tp > w.node_size:
        notes.append(
            f"TP group spans nodes: tp = {layout.tp} > {w.node_size} devices per node; "
            "tensor-parallel collectives run over the scale-out network"
        )
    if w.global_batch_size % per_step:
        effective = int(_scalar(r, "num_micro_batches")) * per_step
        notes.append(
            f"global batch not divisible by dp × micro-batch ({w.global_batch_size} vs "  # noqa: RUF001
            f"{per_step}); estimated with {effective} sequences per step"
        )
    if md.num_layers % layout.pp:
        first, middle, last = (
            int(x[0]) for x in memory.pipeline_split(md.num_layers, np.array([layout.pp]))
        )
        notes.append(
            f"uneven pipeline split: num_layers = {md.num_layers} over pp = {layout.pp} "
            f"stages puts {first} layers on the first stage, {last} on the last and up to "
            f"{middle} on the others"
        )
    per_stage = math.ceil(md.num_layers / layout.pp)
    if layout.virtual_stages > 1 and (
        per_stage % layout.virtual_stages or layout.pp * per_stage - md.num_layers > 2
    ):
        notes.append(
            f"interleaved schedule: the {per_stage} layers of a stage do not split into "
            f"{layout.virtual_stages} equal chunks with at most two layers missing at the "
            "ends, as Megatron-LM needs; estimated as if they did"
        )
    m = int(_scalar(r, "num_micro_batches"))
    if layout.virtual_stages > 1 and m % layout.pp:
        notes.append(
            f"interleaved schedule needs micro-batches ({m}) divisible by pp "
            f"({layout.pp}) in Megatron-LM"
        )
    if layout.cp > 1 or layout.ep > 1:
        notes.append(
            "context- and expert-parallel traffic is modelled from first principles but no "
            "calibration case uses cp > 1 or ep > 1"
        )
    if layout.pp > 1 and _scalar(r, "pp_bubble") > 0.2 * _scalar(r, "step_time"):
        notes.append(
            "pipeline bubble above 20 % of the step: more micro-batches or interleaving would help"
        )
    return notes + _fit_warnings(w, r)


def _fit_warnings(w: Workload, r: LayoutResults) -> list[str]:
    notes: list[str] = []
    needed, have = _scalar(r, "total_memory") / GIB, w.spec.memory_gib
    usable = w.usable_memory / GIB
    if needed > have:
        notes.append(f"does not fit: {needed:.0f} GiB needed of {have:.0f} GiB")
    elif needed > usable:
        notes.append(
            f"tight on memory: {needed:.0f} GiB of {have:.0f} GiB leaves less than the "
            f"{w.framework.memory_headroom:.0%} headroom {w.framework.name} runs keep for "
            "fragmentation and peak transients; expect out-of-memory errors"
        )
    family = w.spec.family
    if not FAMILY_EFFICIENCY.get(family, FAMILY_EFFICIENCY["generic"]).fitted:
        notes.append(
            f"uncalibrated: efficiency of the {family} family is assumed, not fitted to "
            "measurements: treat throughput as a rough guide (the uncertainty band is wider)"
        )
    return notes


def _throughput(w: Workload, layout: ParallelismConfig, r: LayoutResults) -> dict[str, Any]:
    step = _scalar(r, "step_time")
    tokens_per_s = _scalar(r, "tokens_per_step") / step
    per_gpu = tokens_per_s / w.num_gpus
    model_flops = finetune.training_flops_per_token(w.model, w.method)
    hardware_flops = model_flops + finetune.recompute_flops_per_token(
        w.model, w.method, layout.recompute
    )
    return {
        "step_time_s": step,
        "tokens_per_s": tokens_per_s,
        "tokens_per_s_per_gpu": per_gpu,
        "tflops_per_gpu": model_flops * per_gpu / 1e12,
        "mfu": model_flops * per_gpu / w.peak_matmul_flops,
        "hfu": hardware_flops * per_gpu / w.peak_matmul_flops,
        # fp8 MFU is against the fp8 peak, so it falls as speed rises; the bf16 yardstick
        # compares precisions and accelerators on one scale.
        "mfu_peak": {"precision": w.precision, "tflops": w.peak_matmul_flops / 1e12},
        "mfu_bf16": model_flops * per_gpu / w.peak_16bit_flops if w.peak_16bit_flops else None,
        "hardware_flops_per_token": hardware_flops,
    }


def _schedule(w: Workload, tokens_per_s: float) -> dict[str, Any]:
    saved = finetune.checkpoint_parameters(w.model, w.method)
    run = whole_run(w.tokens / tokens_per_s, saved, w.num_gpus, w.node_size, w.run)
    hours = 24.0 * w.num_gpus
    return {
        "goodput": run.goodput,
        "training_days": run.training_days,
        "gpu_hours": run.training_days * hours,
        "whole_run": {
            "steady_state_days": run.steady_state_days,
            "steady_state_gpu_hours": run.steady_state_days * hours,
            "parts_days": dict(run.parts_days),
            "parts_gpu_hours": {k: v * hours for k, v in run.parts_days.items()},
            "capacity": w.run.capacity,
        },
        "goodput_details": {
            "mtbf_hours": run.mtbf_hours,
            "interruptions_per_day": run.interruptions_per_day,
            "checkpoint_write_s": run.checkpoint_write_s,
            "checkpoint_interval_s": run.checkpoint_interval_s,
            "restart_s": run.restart_s,
        },
    }


def _margins_applied(w: Workload) -> dict[str, float]:
    """The margins as shares of the margin-free step time, as this cluster pays them."""
    return {
        "framework_overhead": w.margins.framework_overhead,
        "network_jitter": w.margins.network_jitter * w.jitter_scale,
        "network_jitter_scale": w.jitter_scale,
    }


def _training_method(w: Workload, layout: ParallelismConfig) -> dict[str, Any]:
    """What is trained and with what, and the host memory a node needs for offload."""
    trainable = finetune.trainable_parameters(w.model, w.method)
    return {
        **w.method.as_dict(),
        "optimizer": w.optimizer,
        "master_weights": w.master_weights,
        "offload": w.offload,
        "description": finetune.describe(w.method, w.optimizer),
        "trainable_parameters": trainable,
        "trainable_share": trainable / w.parameters,
        "host_memory_per_node_gib": _host_memory_per_node(w, layout) / GIB,
    }


def _host_memory_per_node(w: Workload, layout: ParallelismConfig) -> float:
    """Host memory the offloaded state of one node's devices takes (0 without offload):
    each device's optimizer state (and master copy), and with parameter offload its
    weights, as ``model_state_bytes`` would hold them on the device. [B]"""
    if w.offload == "none":
        return 0.0
    on_device = dataclasses.replace(w, offload="none")
    r = evaluate_layouts(on_device, Layouts.single(layout))
    host = _scalar(r, "optimizer")
    if w.offload == "optimizer_and_params":
        host += _scalar(r, "weights")
    return host * min(w.node_size, w.num_gpus)


#: Host memory beyond which offloaded state outgrows many 8-GPU servers (cloud H100 and
#: A100 nodes carry 1-2 TiB; NVIDIA DGX H100: 2 TB). [GiB]
HOST_MEMORY_WARNING_GIB = 1024.0


def _host_warnings(method: Mapping[str, Any]) -> list[str]:
    need = method["host_memory_per_node_gib"]
    if need <= HOST_MEMORY_WARNING_GIB:
        return []
    return [
        f"offload needs {need:,.0f} GiB of host memory per node for the offloaded state; "
        "8-GPU servers carry 1-2 TiB: check the nodes, or shard over more of them"
    ]


def _headroom(w: Workload, total_gib: float) -> dict[str, float]:
    usable = w.usable_memory / GIB
    return {
        "usable_gib": usable,
        "headroom_gib": usable - total_gib,
        "used_fraction": total_gib / w.spec.memory_gib,
    }


def estimate_scenario(scenario: Scenario) -> dict[str, Any]:
    """:func:`estimate` for an already validated scenario with an explicit layout."""
    if scenario.parallelism is None:
        raise ScenarioError(
            "parallelism",
            '"auto" needs the layout search (`python -m '
            "estimator search`); give an explicit layout to estimate",
        )
    layout = scenario.parallelism
    w = build_workload(scenario)
    r = evaluate_layouts(w, Layouts.single(layout))
    out: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "estimator_version": ESTIMATOR_VERSION,
        "parameters": w.parameters,
        "active_parameters": w.active_parameters,
        "model_flops_per_token": finetune.training_flops_per_token(w.model, w.method),
        "parallelism": layout.as_dict(),
    }
    out.update(_throughput(w, layout, r))
    out.update(
        {
            "memory_per_gpu_gib": _memory_gib(r),
            "accelerator_memory_gib": w.spec.memory_gib,
            "fits_in_memory": _scalar(r, "total_memory") / GIB <= w.spec.memory_gib,
            "time_per_step_breakdown_s": _breakdown(r),
            "bottleneck": _bottleneck(r),
            "num_micro_batches": int(_scalar(r, "num_micro_batches")),
            "tokens_per_step": _scalar(r, "tokens_per_step"),
        }
    )
    out.update(_schedule(w, out["tokens_per_s"]))
    out["training_method"] = _training_method(w, layout)
    out["framework"] = w.framework.as_dict()
    out["margins_applied"] = _margins_applied(w)
    out["memory_headroom"] = _headroom(w, out["memory_per_gpu_gib"]["total"])
    out["warnings"] = _warnings(w, layout, r) + _host_warnings(out["training_method"])
    return out


def estimate(scenario: Mapping[str, Any] | Scenario) -> dict[str, Any]:
    """Estimate time, memory and cost drivers of one training scenario.

    Parameters
    ----------
    scenario : dict or Scenario
        A scenario in the contract's format (version 1), or an already validated
        :class:`Scenario`. With ``parallelism: "auto"`` the layout search picks the fastest
        layout that fits (:func:`estimator.core.search.estimate_auto`).

    Returns
    -------
    dict
        The contract's ``estimate`` output (JSON-serialisable).

    Raises
    ------
    ScenarioError
        When a field is invalid; ``.key`` names it.
    """
    price = None
    if not isinstance(scenario, Scenario):
        price = price_per_gpu_hour(scenario)
        scenario = validate_scenario(scenario)
    if scenario.parallelism is None:
        # Imported here: the search builds its results through estimate_scenario.
        from estimator.core.search import estimate_auto

        return estimate_auto(scenario, price)
    return estimate_scenario(scenario)
