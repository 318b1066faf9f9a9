"""The one implementation of the per-layout formulas: :func:`evaluate_layouts`.

``estimate`` evaluates a single layout through :func:`evaluate_layouts`; a layout search
evaluates thousands at once through the same function, so the two always agree. The
layouts and the results are the struct-of-arrays types of
:mod:`estimator.core.layout_arrays`, every result an array as long as the layouts; the
communication and host-transfer parts are :mod:`estimator.core.layout_comms`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from estimator.core import comms, compute, finetune, gemm, memory, pipeline
from estimator.core._types import FloatArray
from estimator.core.activations import stage_activation_bytes
from estimator.core.constants import BACKWARD_TO_FORWARD, FORWARD_BACKWARD_PASSES
from estimator.core.layout_arrays import LayoutResults, Layouts, MicroBatch
from estimator.core.layout_comms import (
    context_and_expert_time,
    dp_times,
    offload_times,
    optimizer_parameters,
    pipeline_p2p_time,
    tp_time,
)
from estimator.core.workload import Workload


def _micro_batch(
    workload: Workload, layouts: Layouts, tokens: FloatArray, layers: FloatArray
) -> MicroBatch:
    """Forward, backward, recompute and attention times of one micro-batch on the most
    loaded stage, in forward-pass units: a matmul's backward is its input gradient plus,
    where the weight trains, its weight gradient (Narayanan et al. 2021, backward = 2 x
    forward); FlashAttention's backward is 2.5 x its forward (Dao 2023), unfused attention's
    four matmuls and softmax backward (:func:`compute.unfused_attention_times`). [s]"""
    gemm_flop, gemm_byte = gemm.layer_gemm_time(workload, tokens, layouts.tp, layouts.ep)
    attention, attention_backward = compute.attention_times(workload, tokens, layouts.tp)
    forward_elem = compute.elementwise_time(
        workload, tokens, layouts.tp, layouts.sequence_parallel, "forward"
    )
    backward_elem = compute.elementwise_time(
        workload, tokens, layouts.tp, layouts.sequence_parallel, "backward"
    )
    head_flop, head_byte = compute.lm_head_time(workload, tokens, layouts.tp)
    efficiency = workload.efficiency
    overhead = (
        workload.software.layer_overhead_s
        * efficiency.layer_overhead_scale
        * efficiency.overhead_scale
    )
    casts = gemm.fp8_cast_time(workload, tokens, layouts.tp, layouts.ep)
    forward_elem, backward_elem = forward_elem + casts / 2, backward_elem + casts / 2
    # Training method (finetune): adapters add their skinny matmuls, QLoRA dequantises the
    # weights before each pass; frozen weights skip their weight-gradient matmul, and layers
    # below every trained weight skip the backward altogether.
    adapter_flop, adapter_byte = gemm.adapter_gemm_time(workload, tokens, layouts.tp, layouts.ep)
    dequantize = gemm.dequantize_time(workload, layouts.tp, layouts.ep)
    through = finetune.backward_layer_share(workload.model, workload.method)
    gemm_backward = through + finetune.weight_gradient_layer_share(workload.model, workload.method)
    adapters = adapter_flop + adapter_byte
    forward_layer = gemm_flop + gemm_byte + attention + forward_elem + adapters + dequantize
    backward_layer = gemm_backward * (gemm_flop + gemm_byte) + through * (
        attention_backward + backward_elem + BACKWARD_TO_FORWARD * adapters + dequantize + overhead
    )
    recompute_layer = through * np.where(
        layouts.recompute == memory.FULL_RECOMPUTE,
        forward_layer,
        np.where(layouts.recompute == memory.SELECTIVE_RECOMPUTE, attention, 0.0),
    )
    memory_layer = (1 + gemm_backward) * gemm_byte + forward_elem + backward_elem + dequantize
    # The LM head's backward: input and weight gradients, or the input gradient alone.
    head_trained = finetune.head_trained(workload.model, workload.method)
    head_backward = BACKWARD_TO_FORWARD if head_trained else 1.0
    balance = _stage_share(
        workload,
        layouts,
        layers,
        forward_layer + backward_layer + recompute_layer,
        (1 + head_backward) / FORWARD_BACKWARD_PASSES * (head_flop + head_byte),
    )
    return MicroBatch(
        forward=balance
        * (
            layers * forward_layer
            + head_flop / FORWARD_BACKWARD_PASSES
            + head_byte / FORWARD_BACKWARD_PASSES
        ),
        backward=balance
        * (
            layers * backward_layer
            + head_backward * (head_flop + head_byte) / FORWARD_BACKWARD_PASSES
        ),
        recompute=balance * layers * recompute_layer,
        attention=layers * (attention + through * attention_backward),
        memory_bound=layers * memory_layer + head_byte,
    )


def _stage_share(
    workload: Workload,
    layouts: Layouts,
    layers: FloatArray,
    layer_time: FloatArray,
    head_time: FloatArray,
) -> FloatArray:
    """Time of the slowest stage relative to "its layers + the LM head".

    The split is :func:`pipeline.pipeline_split`: k = ceil(l / p) layers on the middle stages,
    fewer on the ends, the last also running the LM head and loss. The slowest stage runs
    max(k layers, last-stage layers + head); with p = 1 that is all layers + head.
    """
    own = layers * layer_time + head_time
    last = pipeline.stage_layers(workload.model.num_layers, layouts.pp, "last")
    return np.maximum(layers * layer_time, last * layer_time + head_time) / own


def _stage_memory(
    workload: Workload, states: tuple[FloatArray, ...], activations: FloatArray
) -> tuple[FloatArray, ...]:
    """Memory parts of a pipeline stage holding model ``states`` (weights, gradients,
    optimizer) and ``activations``: (weights, gradients, optimizer, activations, other,
    total). [B]"""
    weights, gradients, optimizer = states
    tensors = weights + gradients + optimizer + activations
    efficiency = workload.efficiency
    reserved = efficiency.reserved_memory_gib * memory.GIB
    other = memory.allowance_bytes(tensors, reserved, efficiency.fragmentation)
    return weights, gradients, optimizer, activations, other, tensors + other


def _model_states(
    workload: Workload, layouts: Layouts, stages: tuple[str, ...]
) -> list[tuple[FloatArray, FloatArray, FloatArray]]:
    """Weights, gradients and optimizer state of each of ``stages``. [B]"""
    return memory.stage_model_state_bytes(
        workload.model,
        workload.precision,
        layouts.tp,
        layouts.pp,
        layouts.dp * layouts.cp,
        layouts.ep,
        layouts.zero_stage,
        workload.offload,
        stages,
        workload.method,
        workload.optimizer,
        workload.master_weights,
    )


def _activations(
    workload: Workload, layouts: Layouts, tokens: FloatArray, m: FloatArray, stages: tuple[str, ...]
) -> list[FloatArray]:
    """Activations of each of ``stages``, of the layers that run a backward pass. [B]"""
    per_stage = stage_activation_bytes(
        workload.model,
        tokens,
        layouts.tp,
        layouts.pp,
        layouts.sequence_parallel,
        layouts.recompute,
        m,
        layouts.virtual_stages,
        workload.activation_bytes,
        layouts.activation_offload,
        workload.efficiency.logits_bytes,
        stages,
        workload.method,
        workload.framework.flash_attention,
        workload.framework.dropout,
    )
    through = finetune.backward_layer_share(workload.model, workload.method)
    return [activations * through for activations in per_stage]


def _memory(
    workload: Workload, layouts: Layouts, tokens: FloatArray, m: FloatArray
) -> tuple[FloatArray, ...]:
    """Memory parts of the pipeline stage that needs the most (first, second or last: see
    :data:`pipeline.STAGES`); with pp = 1 the three are the same device."""
    deepest = float(layouts.pp.max())
    # Without pipelining the three are one device; with two stages the second is the last.
    stages = pipeline.STAGES if deepest > 2 else ("first", "last") if deepest > 1 else ("first",)
    activations = _activations(workload, layouts, tokens, m, stages)
    per_stage = [
        _stage_memory(workload, states, held)
        for states, held in zip(_model_states(workload, layouts, stages), activations, strict=True)
    ]
    if len(per_stage) == 1:
        return per_stage[0]
    worst = np.stack([parts[5] for parts in per_stage]).argmax(axis=0)
    return tuple(worst.choose([parts[i] for parts in per_stage]) for i in range(len(per_stage[0])))


def _compiler_remat(
    workload: Workload,
    layouts: Layouts,
    tokens: FloatArray,
    layers: FloatArray,
    m: FloatArray,
    micro_batch: MicroBatch,
    parts: tuple[FloatArray, ...],
) -> tuple[MicroBatch, tuple[FloatArray, ...]]:
    """XLA's rematerialisation pass: where the saved activations do not fit, the compiler
    recomputes more of the forward instead of failing (XLA HLO rematerialization, run when a
    program exceeds the device's memory). The share f of the gap between the layout's
    activations and those of full recomputation that must go is dropped, and f of the
    extra recompute time is paid: a linear interpolation towards full recomputation.
    """
    full_code = float(memory.FULL_RECOMPUTE)
    full = dataclasses.replace(layouts, recompute=np.full_like(layouts.recompute, full_code))
    full_parts = _memory(workload, full, tokens, m)
    capacity = workload.usable_memory
    gap = parts[5] - full_parts[5]
    over = parts[5] - capacity
    share = np.where((over > 0) & (gap > 0), np.clip(over / np.where(gap > 0, gap, 1.0), 0, 1), 0)
    if not np.any(share > 0):
        return micro_batch, parts
    full_recompute = _micro_batch(workload, full, tokens, layers).recompute
    micro_batch = dataclasses.replace(
        micro_batch,
        recompute=micro_batch.recompute + share * (full_recompute - micro_batch.recompute),
    )
    mixed = tuple(p - share * (p - f) for p, f in zip(parts, full_parts, strict=True))
    return micro_batch, mixed


def evaluate_layouts(workload: Workload, layouts: Layouts) -> LayoutResults:
    """Memory and step time of every layout in ``layouts`` for one scenario.

    One optimizer step runs m = ceil(B / (dp b)) micro-batches through each pipeline. The
    1F1B bubble is (p - 1) micro-batch times, (p - 1)/v interleaved, i.e. (p - 1)/(m v) of
    the pipeline's busy time. docs/methodology.md lists every term with its source.

    Parameters
    ----------
    workload : Workload
        The scenario's constants (:func:`estimator.core.workload.build_workload`).
    layouts : Layouts
        The layouts to evaluate, one per index.

    Returns
    -------
    LayoutResults
        Per layout: memory per device of the fullest stage [B] and times per optimizer
        step [s], each an array as long as ``layouts``.

    References
    ----------
    Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters
    Using Megatron-LM", SC21, section 2.2 (pipeline bubble); Korthikanti et al. 2022,
    "Reducing Activation Recomputation in Large Transformer Models" (activations,
    tensor-parallel communication); Rajbhandari et al. 2020, "ZeRO" (model states,
    data-parallel traffic).
    """
    m = np.ceil(workload.global_batch_size / (layouts.dp * layouts.micro_batch_size))
    tokens = layouts.micro_batch_size * workload.model.seq_len / layouts.cp
    layers = pipeline.layers_per_stage(workload.model.num_layers, layouts.pp)
    micro_batch = _micro_batch(workload, layouts, tokens, layers)
    memory_parts = _memory(workload, layouts, tokens, m)
    if workload.efficiency.compiler_remat or workload.framework.compiler_remat:
        micro_batch, memory_parts = _compiler_remat(
            workload, layouts, tokens, layers, m, micro_batch, memory_parts
        )
    # Tensor-parallel collectives split into chunks and pipelined with the matmuls they feed
    # (Megatron-LM --tp-comm-overlap, PyTorch async TP, XLA collective matmul): a share
    # tp_overlap of them hides behind the matmul time (Wang et al. 2022, "Overlap
    # Communication with Dependent Computation via Decomposition", ASPLOS '23).
    # Only inside the fast domain: the chunked pipelining needs the NVLink-class latency
    # (Megatron-LM's userbuffers, PyTorch async TP), and only where the framework has it.
    tp_overlap = np.where(
        layouts.tp <= workload.node_size,
        workload.efficiency.tp_overlap * float(workload.framework.tp_overlap),
        0.0,
    )
    tp_comm = comms.exposed_time(
        tp_time(workload, layouts, tokens, layers),
        micro_batch.forward + micro_batch.backward,
        tp_overlap,
    )
    serial_comm = context_and_expert_time(workload, layouts, tokens, layers, micro_batch)
    serial_comm = serial_comm + pipeline_p2p_time(workload, layouts, tokens)
    dp_gross, dp_exposed = dp_times(workload, layouts, m, micro_batch)
    offload_micro_batch, offload_step = offload_times(workload, layouts, tokens, micro_batch)
    if workload.offload == "none":
        optimizer = compute.optimizer_time(workload, optimizer_parameters(workload, layouts))
    else:
        optimizer = offload_step
    busy = (
        micro_batch.forward
        + micro_batch.backward
        + micro_batch.recompute
        + tp_comm
        + offload_micro_batch
    )
    bubble = (layouts.pp - 1) / layouts.virtual_stages * busy
    exposed = m * serial_comm + dp_exposed
    base = m * busy + bubble + exposed + optimizer
    # The two margins add to the step: framework overhead everywhere (less on a stack that
    # spends less outside its kernels: efficiency.overhead_scale), network jitter as a
    # share that grows with the cluster (workload.network_jitter_scale).
    framework_overhead = (
        workload.margins.framework_overhead * workload.efficiency.overhead_scale * base
    )
    jitter = workload.margins.network_jitter * workload.jitter_scale * base
    overheads = framework_overhead + jitter
    return LayoutResults(
        num_micro_batches=m,
        tokens_per_step=m * layouts.dp * layouts.micro_batch_size * workload.model.seq_len,
        weights=memory_parts[0],
        gradients=memory_parts[1],
        optimizer=memory_parts[2],
        activations=memory_parts[3],
        other=memory_parts[4],
        total_memory=memory_parts[5],
        compute=m * (micro_batch.forward + micro_batch.backward) + optimizer,
        recompute=m * micro_batch.recompute,
        tp_communication=m * tp_comm,
        pp_bubble=bubble,
        dp_communication=dp_gross,
        exposed_communication=exposed,
        overheads=overheads,
        framework_overhead=framework_overhead,
        network_jitter=jitter,
        step_time=base + overheads,
        memory_bound=m * micro_batch.memory_bound + optimizer,
    )
