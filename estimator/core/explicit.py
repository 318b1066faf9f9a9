"""``estimate_scenario(scenario) -> dict``: the contract's output for one explicit layout.

Below the entry point :func:`estimator.core.estimate.estimate`, which validates, applies a
measured speed (:mod:`estimator.core.measurement`) and hands ``parallelism: "auto"`` to the
layout search; the search builds its results through :func:`estimate_scenario` too.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from estimator.core import finetune, pipeline
from estimator.core import layout_rules as rules
from estimator.core.calibration import efficiency_for, stack_calibrated, stack_factor, stack_name
from estimator.core.constants import HOURS_PER_DAY, TERA
from estimator.core.errors import ScenarioError
from estimator.core.layout import evaluate_layouts
from estimator.core.layout_arrays import LayoutResults, Layouts
from estimator.core.memory import DOES_NOT_FIT, GIB, TIGHT, memory_verdict
from estimator.core.scenario import ParallelismConfig, Scenario
from estimator.core.validation import validate_scenario
from estimator.core.wholerun import whole_run
from estimator.core.workload import (
    Workload,
    build_workload,
    matmul_peak_tflops,
    peak_16bit_tflops,
)

ESTIMATOR_VERSION = "0.1.0"
FORMAT_VERSION = 1


def scalar(results: LayoutResults, name: str) -> float:
    """The one layout's ``name`` of :class:`LayoutResults` of a single layout."""
    return float(getattr(results, name)[0])


def _memory_gib(results: LayoutResults) -> dict[str, float]:
    parts = ("weights", "gradients", "optimizer", "activations", "other")
    out = {p: scalar(results, p) / GIB for p in parts}
    out["total"] = scalar(results, "total_memory") / GIB
    return out


def _breakdown(results: LayoutResults) -> dict[str, float]:
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
    return {k: scalar(results, k) for k in keys}


def _bottleneck(results: LayoutResults) -> str:
    """The largest of compute-bound, memory-bound, communication and bubble time."""
    memory_bound = scalar(results, "memory_bound")
    candidates = {
        "compute": scalar(results, "compute") + scalar(results, "recompute") - memory_bound,
        "memory": memory_bound,
        "communication": scalar(results, "tp_communication")
        + scalar(results, "exposed_communication"),
        "pipeline_bubble": scalar(results, "pp_bubble"),
    }
    return max(candidates, key=lambda name: candidates[name])


def _warnings(workload: Workload, layout: ParallelismConfig, results: LayoutResults) -> list[str]:
    """Warnings for a valid layout that breaks a rule Megatron-LM-style frameworks enforce
    (:mod:`estimator.core.layout_rules`; the layout search never keeps such a layout)."""
    notes: list[str] = []
    model, per_step = workload.model, layout.dp * layout.micro_batch_size
    if not rules.tp_within_node(layout.tp, workload.node_size):
        notes.append(
            f"TP group spans nodes: tp = {layout.tp} > {workload.node_size} devices per node; "
            "tensor-parallel collectives run over the scale-out network"
        )
    if not rules.batch_divides(workload.global_batch_size, layout.dp, layout.micro_batch_size):
        effective = int(scalar(results, "num_micro_batches")) * per_step
        notes.append(
            f"global batch not divisible by dp × micro-batch ({workload.global_batch_size} vs "  # noqa: RUF001
            f"{per_step}); estimated with {effective} sequences per step"
        )
    if not rules.pipeline_divides_layers(model.num_layers, layout.pp):
        first, middle, last = (
            int(x[0]) for x in pipeline.pipeline_split(model.num_layers, np.array([layout.pp]))
        )
        notes.append(
            f"uneven pipeline split: num_layers = {model.num_layers} over pp = {layout.pp} "
            f"stages puts {first} layers on the first stage, {last} on the last and up to "
            f"{middle} on the others"
        )
    if not rules.interleaved_chunks_even(model.num_layers, layout.pp, layout.virtual_stages):
        notes.append(
            f"interleaved schedule: the {math.ceil(model.num_layers / layout.pp)} layers of a "
            f"stage do not split into {layout.virtual_stages} equal chunks with at most two "
            "layers missing at the ends, as Megatron-LM needs; estimated as if they did"
        )
    micro_batches = int(scalar(results, "num_micro_batches"))
    if not rules.interleaved_micro_batches_divide(micro_batches, layout.pp, layout.virtual_stages):
        notes.append(
            f"interleaved schedule needs micro-batches ({micro_batches}) divisible by pp "
            f"({layout.pp}) in Megatron-LM"
        )
    if layout.cp > 1 or layout.ep > 1:
        notes.append(
            "context- and expert-parallel traffic is modelled from first principles but no "
            "calibration case uses cp > 1 or ep > 1"
        )
    if layout.pp > 1 and scalar(results, "pp_bubble") > 0.2 * scalar(results, "step_time"):
        notes.append(
            "pipeline bubble above 20 % of the step: more micro-batches or interleaving would help"
        )
    return notes + _fit_warnings(workload, results)


#: How the warning of a layout that does not fit in memory begins.
DOES_NOT_FIT_NOTE = "does not fit in memory"


def _fit_warnings(workload: Workload, results: LayoutResults) -> list[str]:
    notes: list[str] = []
    needed, have = scalar(results, "total_memory") / GIB, workload.spec.memory_gib
    usable = workload.usable_memory / GIB
    framework = workload.framework
    verdict = memory_verdict(needed, usable, have)
    if verdict == DOES_NOT_FIT:
        notes.append(
            f"{DOES_NOT_FIT_NOTE}: needs {needed:.1f} GiB per device, "
            f"{workload.spec.id} has {have:g} GiB"
        )
    elif verdict == TIGHT:
        notes.append(
            f"tight on memory: needs {needed:.1f} GiB per device, {needed - usable:.1f} GiB "
            f"over the {usable:.1f} GiB {framework.name} runs use of {have:g} GiB (the "
            f"{framework.memory_headroom:.0%} kept for fragmentation and peak transients): "
            "it may run out of memory; the memory levers show what makes room"
        )
    if not framework.flash_attention:
        notes.append(
            f"estimated on {framework.name}: attention writes, soft-maxes and re-reads every "
            "s x s score; today's stacks train in bf16 with FlashAttention (set precision to "
            "bf16, or framework to 'megatron-lm' to keep fp16 on today's kernels)"
        )
    family = workload.spec.family
    if not efficiency_for(family).fitted:
        notes.append(
            f"uncalibrated: efficiency of the {family} family is assumed, not fitted to "
            "measurements: treat throughput as a rough guide (the uncertainty band is wider)"
        )
    return notes


def _throughput(
    workload: Workload, layout: ParallelismConfig, results: LayoutResults
) -> dict[str, Any]:
    step = scalar(results, "step_time")
    tokens_per_s = scalar(results, "tokens_per_step") / step
    per_gpu = tokens_per_s / workload.num_gpus
    model_flops = finetune.training_flops_per_token(workload.model, workload.method)
    hardware_flops = model_flops + finetune.recompute_flops_per_token(
        workload.model, workload.method, layout.recompute
    )
    # MFU is against the datasheet peaks: a power limit slows the run, it does not move
    # the yardstick (cluster.power_limit_w scales workload.spec's peaks).
    datasheet = workload.spec.datasheet()
    peak = matmul_peak_tflops(datasheet, workload.precision) * TERA
    peak_16bit = peak_16bit_tflops(datasheet) * TERA
    return {
        "step_time_s": step,
        "tokens_per_s": tokens_per_s,
        "tokens_per_s_per_gpu": per_gpu,
        "tflops_per_gpu": model_flops * per_gpu / TERA,
        "mfu": model_flops * per_gpu / peak,
        "hfu": hardware_flops * per_gpu / peak,
        # fp8 MFU is against the fp8 peak, so it falls as speed rises; the bf16 yardstick
        # compares precisions and accelerators on one scale.
        "mfu_peak": {"precision": workload.precision, "tflops": peak / TERA},
        "mfu_bf16": model_flops * per_gpu / peak_16bit if peak_16bit else None,
        "hardware_flops_per_token": hardware_flops,
    }


def _schedule(workload: Workload, tokens_per_s: float) -> dict[str, Any]:
    saved = finetune.checkpoint_parameters(workload.model, workload.method)
    run = whole_run(
        workload.tokens / tokens_per_s, saved, workload.num_gpus, workload.node_size, workload.run
    )
    hours = HOURS_PER_DAY * workload.num_gpus
    return {
        "goodput": run.goodput,
        "training_days": run.training_days,
        "gpu_hours": run.training_days * hours,
        "whole_run": {
            "steady_state_days": run.steady_state_days,
            "steady_state_gpu_hours": run.steady_state_days * hours,
            "parts_days": dict(run.parts_days),
            "parts_gpu_hours": {k: v * hours for k, v in run.parts_days.items()},
            "capacity": workload.run.capacity,
        },
        "goodput_details": {
            "mtbf_hours": run.mtbf_hours,
            "interruptions_per_day": run.interruptions_per_day,
            "checkpoint_write_s": run.checkpoint_write_s,
            "checkpoint_interval_s": run.checkpoint_interval_s,
            "restart_s": run.restart_s,
        },
    }


def schedule_of(scenario: Mapping[str, Any], tokens_per_s: float) -> dict[str, Any]:
    """The whole-run figures (days, GPU-hours, goodput, parts) of ``scenario`` (explicit
    layout) at a throughput of ``tokens_per_s``: what a rescaled step time changes."""
    return _schedule(build_workload(validate_scenario(scenario)), tokens_per_s)


def _software_stack(workload: Workload) -> dict[str, Any]:
    """The stack assumed: ``id``, ``name``, ``factor`` [1] and ``calibrated`` (a factor of
    its own, not the pooled one); :func:`~estimator.core.estimate.stack_alternatives`
    adds the other stacks."""
    return {
        "id": workload.stack,
        "name": stack_name(workload.stack),
        "factor": stack_factor(workload.stack),
        "calibrated": stack_calibrated(workload.stack),
    }


def _margins_applied(workload: Workload) -> dict[str, float]:
    """The margins as shares of the margin-free step time, as this cluster and stack pay
    them: the framework overhead times the stack's ``overhead_scale``."""
    scale = workload.efficiency.overhead_scale
    return {
        "framework_overhead": workload.margins.framework_overhead * scale,
        "framework_overhead_scale": scale,
        "network_jitter": workload.margins.network_jitter * workload.jitter_scale,
        "network_jitter_scale": workload.jitter_scale,
    }


def _training_method(workload: Workload, layout: ParallelismConfig) -> dict[str, Any]:
    """What is trained and with what, and the host memory a node needs for offload."""
    trainable = finetune.trainable_parameters(workload.model, workload.method)
    return {
        **workload.method.as_dict(),
        "optimizer": workload.optimizer,
        "master_weights": workload.master_weights,
        "offload": workload.offload,
        "description": finetune.describe(workload.method, workload.optimizer),
        "trainable_parameters": trainable,
        "trainable_share": trainable / workload.parameters,
        "host_memory_per_node_gib": _host_memory_per_node(workload, layout) / GIB,
    }


def _host_memory_per_node(workload: Workload, layout: ParallelismConfig) -> float:
    """Host memory the offloaded state of one node's devices takes (0 without offload):
    each device's optimizer state (and master copy), and with parameter offload its
    weights, as ``model_state_bytes`` would hold them on the device. [B]"""
    if workload.offload == "none":
        return 0.0
    on_device = dataclasses.replace(workload, offload="none")
    results = evaluate_layouts(on_device, Layouts.single(layout))
    host = scalar(results, "optimizer")
    if workload.offload == "optimizer_and_params":
        host += scalar(results, "weights")
    return host * min(workload.node_size, workload.num_gpus)


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


def _headroom(workload: Workload, total_gib: float) -> dict[str, float]:
    usable = workload.usable_memory / GIB
    return {
        "usable_gib": usable,
        "headroom_gib": usable - total_gib,
        "used_fraction": total_gib / workload.spec.memory_gib,
    }


def estimate_scenario(scenario: Scenario) -> dict[str, Any]:
    """:func:`~estimator.core.estimate.estimate` for an already validated scenario with an
    explicit layout.

    Parameters
    ----------
    scenario : Scenario
        A validated scenario with an explicit ``parallelism``.

    Returns
    -------
    dict
        The contract's ``estimate`` output (JSON-serialisable).

    Raises
    ------
    ScenarioError
        Naming ``parallelism`` when it is ``"auto"`` (None).
    """
    if scenario.parallelism is None:
        raise ScenarioError(
            "parallelism",
            '"auto" needs the layout search (`python -m '
            "estimator search`); give an explicit layout to estimate",
        )
    layout = scenario.parallelism
    workload = build_workload(scenario)
    results = evaluate_layouts(workload, Layouts.single(layout))
    verdict = memory_verdict(
        scalar(results, "total_memory") / GIB,
        workload.usable_memory / GIB,
        workload.spec.memory_gib,
    )
    out: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "estimator_version": ESTIMATOR_VERSION,
        "parameters": workload.parameters,
        "active_parameters": workload.active_parameters,
        "model_flops_per_token": finetune.training_flops_per_token(workload.model, workload.method),
        "parallelism": layout.as_dict(),
    }
    out.update(_throughput(workload, layout, results))
    out.update(
        {
            "memory_per_gpu_gib": _memory_gib(results),
            "accelerator_memory_gib": workload.spec.memory_gib,
            "fits_in_memory": verdict != DOES_NOT_FIT,  # the device's memory, not the usable
            "memory_verdict": verdict,
            "time_per_step_breakdown_s": _breakdown(results),
            "bottleneck": _bottleneck(results),
            "num_micro_batches": int(scalar(results, "num_micro_batches")),
            "tokens_per_step": scalar(results, "tokens_per_step"),
        }
    )
    out.update(_schedule(workload, out["tokens_per_s"]))
    out["training_method"] = _training_method(workload, layout)
    out["framework"] = workload.framework.as_dict()
    out["software_stack"] = _software_stack(workload)
    out["margins_applied"] = _margins_applied(workload)
    out["memory_headroom"] = _headroom(workload, out["memory_per_gpu_gib"]["total"])
    out["warnings"] = _warnings(workload, layout, results) + _host_warnings(out["training_method"])
    return out
