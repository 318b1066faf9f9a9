"""Communication and host-transfer time of layouts: the tensor-, context-, expert-,
pipeline- and data-parallel collectives and sends, and what offload moves to the host.

Every function takes :class:`~estimator.core.layout_arrays.Layouts` and returns arrays as
long as it; :func:`estimator.core.layout.evaluate_layouts` adds the parts to the step.
"""

from __future__ import annotations

import numpy as np

from estimator.core import comms, compute, finetune, gemm, memory, pipeline
from estimator.core import model as arithmetic
from estimator.core._types import FloatArray, Numeric
from estimator.core.activations import offloaded_activation_bytes
from estimator.core.constants import (
    ALL_REDUCE_PHASES,
    BACKWARD_TO_FORWARD,
    CP_EXCHANGES_BACKWARD,
    CP_EXCHANGES_FORWARD,
    EP_ALL_TO_ALLS_BACKWARD,
    EP_ALL_TO_ALLS_FORWARD,
    MCORE_BUCKET_MIN_PARAMETERS,
    MCORE_BUCKET_PARAMETERS_PER_RANK,
    PIPELINE_SENDS_PER_MICRO_BATCH,
    TP_COLLECTIVES_BACKWARD,
    TP_COLLECTIVES_FORWARD,
    ZERO3_WEIGHT_GATHERS,
)
from estimator.core.layout_arrays import Layouts, MicroBatch
from estimator.core.workload import Workload


def _per_layer_count(forward: float, backward: float, recompute: FloatArray) -> FloatArray:
    """Collectives per layer and micro-batch: those of the forward and the backward, plus
    the forward's again where full recomputation re-runs it (Korthikanti et al. 2022,
    section 5). [1]"""
    full = recompute == memory.FULL_RECOMPUTE
    return np.where(full, forward + backward + forward, forward + backward)


def _group_link(
    workload: Workload, size: Numeric, stride: Numeric, nics: Numeric | None = None
) -> tuple[FloatArray, FloatArray]:
    """(bandwidth [B/s], latency per ring step [s]) of a process group of ``size`` ranks
    ``stride`` apart (:func:`comms.link`); ``nics`` caps the NICs per node its node
    crossings use (default: one per member of the node)."""
    efficiency = workload.efficiency
    return comms.link(
        comms.spans_nodes(size, stride, workload.node_size),
        comms.members_per_node(size, stride, workload.node_size),
        size,
        workload.intra_node_bandwidth * efficiency.intra_node_bandwidth,
        workload.inter_node_bandwidth * efficiency.inter_node_bandwidth,
        efficiency.intra_node_latency_s,
        efficiency.inter_node_latency_s,
        nics,
    )


def tp_time(
    workload: Workload, layouts: Layouts, tokens: FloatArray, layers: FloatArray
) -> FloatArray:
    """Megatron TP collectives per micro-batch: per layer 2 all-reduces forward and 2
    backward (+2 with full recompute) of b s h values; sequence parallelism swaps each for an
    all-gather + reduce-scatter of equal cost (Korthikanti et al. 2022, section 4.2.2).
    """
    bandwidth, latency = _group_link(workload, layouts.tp, 1.0)
    size = tokens * workload.model.hidden_size * workload.activation_bytes
    count = _per_layer_count(TP_COLLECTIVES_FORWARD, TP_COLLECTIVES_BACKWARD, layouts.recompute)
    return layers * count * comms.all_reduce_time(size, layouts.tp, bandwidth, latency)


def context_and_expert_time(
    workload: Workload,
    layouts: Layouts,
    tokens: FloatArray,
    layers: FloatArray,
    micro_batch: MicroBatch,
) -> FloatArray:
    """Exposed ring-attention (cp) and expert all-to-all (ep) time per micro-batch.

    Ring attention passes each device's K and V blocks c - 1 times per exchange round
    (Liu et al. 2023); the expert all-to-alls dispatch and combine b (s/c) k h / t values
    per MoE layer and pass (Lepikhin et al. 2021, GShard). Where the framework overlaps
    them with the shared experts, which every token runs whatever the routing (DeepSeek-AI
    2024, arXiv 2405.04434, section 3.4; Megatron-Core ``--moe-shared-expert-overlap``),
    they hide behind the shared experts' forward, backward and recomputed forward as the
    ring hides behind attention; otherwise they are exposed whole.
    """
    model, value_bytes = workload.model, workload.activation_bytes
    bandwidth, latency = _group_link(workload, layouts.cp, layouts.tp)
    # K and V blocks of this device's heads.
    kv = tokens * arithmetic.kv_width_per_device(model, layouts.tp) * value_bytes
    rounds = _per_layer_count(CP_EXCHANGES_FORWARD, CP_EXCHANGES_BACKWARD, layouts.recompute)
    ring = layers * rounds * (layouts.cp - 1) * comms.p2p_time(kv, bandwidth, latency)
    context = comms.exposed_time(ring, micro_batch.attention, workload.software.overlap)
    if model.moe is None:
        return context
    share = arithmetic.num_moe_layers(model) / model.num_layers
    bandwidth, latency = _group_link(workload, layouts.ep, layouts.tp * layouts.cp)
    size = tokens * model.moe.top_k * model.hidden_size * value_bytes / layouts.tp
    count = _per_layer_count(EP_ALL_TO_ALLS_FORWARD, EP_ALL_TO_ALLS_BACKWARD, layouts.recompute)
    all_to_all = (
        layers * share * count * comms.all_to_all_time(size, layouts.ep, bandwidth, latency)
    )
    passes = _per_layer_count(1.0, BACKWARD_TO_FORWARD, layouts.recompute)
    shared = layers * passes * gemm.shared_expert_time(workload, tokens, layouts.tp)
    overlap = workload.software.overlap * float(workload.framework.shared_expert_overlap)
    return context + comms.exposed_time(all_to_all, shared, overlap)


def pipeline_p2p_time(workload: Workload, layouts: Layouts, tokens: FloatArray) -> FloatArray:
    """Stage-boundary sends per micro-batch: activations forward, gradients backward, once
    per model chunk (v of them when interleaved); split over t (Megatron's scatter-gather).
    """
    # A pair of neighbouring stages, tp * cp * dp ranks apart.
    bandwidth, latency = _group_link(workload, 2.0, layouts.tp * layouts.cp * layouts.dp)
    size = tokens * workload.model.hidden_size * workload.activation_bytes / layouts.tp
    sends = PIPELINE_SENDS_PER_MICRO_BATCH * layouts.virtual_stages
    per_micro_batch = sends * comms.p2p_time(size, bandwidth, latency)
    return np.where(layouts.pp > 1, per_micro_batch, 0.0)


def mcore_buckets(parameters: Numeric, dp: Numeric, chunks: Numeric) -> FloatArray:
    """Collectives Megatron-Core's DDP moves ``parameters`` in: buckets of at most
    max(40 M, 1 M x dp) parameters (``DistributedDataParallelConfig.bucket_size``), at
    least one per model chunk (each chunk has its own buffers); none for no parameters. [1]
    """
    size = np.maximum(MCORE_BUCKET_MIN_PARAMETERS, MCORE_BUCKET_PARAMETERS_PER_RANK * dp)
    params = np.asarray(parameters, dtype=np.float64)
    return np.where(params > 0, np.maximum(chunks, np.ceil(params / size)), 0.0)


def _dp_gather_times(workload: Workload, layouts: Layouts) -> tuple[FloatArray, FloatArray]:
    """All-gather time of the stage's weights and reduce-scatter time of its gradients
    over the data-parallel group (d c ranks; routed experts over d c / e).

    Each volume moves as one collective per layer of the stage (FSDP units, DDP buckets),
    so the latency is paid per layer; Megatron-Core's DDP moves it in buckets of
    :func:`mcore_buckets`, fewer as the group grows. Gradients are reduced in the training
    precision, and only for what is trained (the adapters under LoRA); weights move at
    their stored size (NF4 under QLoRA, plus the adapters).
    """
    weight_bytes, gradient_bytes, _ = memory.bytes_per_parameter(
        workload.precision, workload.optimizer, workload.method.adapters
    )
    dense, expert = memory.stage_parameters(workload.model, layouts.tp, layouts.pp, layouts.ep)
    dp_cp = layouts.dp * layouts.cp
    per_layer = pipeline.layers_per_stage(workload.model.num_layers, layouts.pp) + 1.0
    # A model without routed experts has no expert collectives to pay the latency of.
    dense_collectives, expert_collectives = per_layer, np.where(expert > 0, per_layer, 0.0)
    if workload.framework.mcore_ddp:  # buckets, but FSDP (stage 3) still gathers per layer
        buckets = mcore_buckets(dense, dp_cp, layouts.virtual_stages)
        expert_buckets = mcore_buckets(expert, dp_cp / layouts.ep, layouts.virtual_stages)
        dense_collectives = np.where(layouts.zero_stage == 3, per_layer, buckets)
        expert_collectives = np.where(layouts.zero_stage == 3, expert_collectives, expert_buckets)
    # ZeRO-3 on a stack whose sharded collectives use one NIC per device.
    nics = None
    if not workload.framework.sharded_multi_rail:
        nics = np.where(layouts.zero_stage == 3, 1.0, np.inf)
    bandwidth, latency = _group_link(workload, dp_cp, layouts.tp, nics)
    expert_bandwidth, expert_latency = _group_link(
        workload, dp_cp / layouts.ep, layouts.tp * layouts.ep, nics
    )
    adapters = _adapter_parameters(workload, layouts)

    def gather(dense_bytes: FloatArray, expert_bytes: FloatArray) -> FloatArray:
        return comms.all_gather_time(
            dense_bytes, dp_cp, bandwidth, latency * dense_collectives
        ) + comms.all_gather_time(
            expert_bytes, dp_cp / layouts.ep, expert_bandwidth, expert_latency * expert_collectives
        )

    base = finetune.base_weight_bytes(workload.model, workload.method, weight_bytes)
    weights = gather(base * dense + weight_bytes * adapters, base * expert)
    if workload.method.adapters:
        return weights, gather(gradient_bytes * adapters, 0.0 * adapters)
    share = finetune.trained_share(workload.model, workload.method)
    return weights, gather(share * gradient_bytes * dense, share * gradient_bytes * expert)


def _adapter_parameters(workload: Workload, layouts: Layouts) -> FloatArray:
    """LoRA adapter parameters one device of the busiest stage holds (0 without). [1]"""
    per_layer = (
        finetune.adapter_parameters(workload.model, workload.method) / workload.model.num_layers
    )
    return per_layer * pipeline.layers_per_stage(workload.model.num_layers, layouts.pp) / layouts.tp


def chunked_exposed_time(
    communication: Numeric, compute: Numeric, chunks: Numeric, spacing: Numeric, overlap: Numeric
) -> FloatArray:
    """Exposed time of a data-parallel collective split over the ``chunks`` model chunks of
    an interleaved pipeline, each chunk's share launched when that chunk is ready.

    A chunk's weights are needed at its first forward, and its gradients are final after its
    last backward; the interleaved schedule runs ``spacing`` (min(p, m)) micro-batches
    through one chunk before the next, so consecutive chunks' collectives are that many
    chunk passes apart and hide behind the other chunks' compute: a window of
    ``compute``/v (1 + (v - 1) spacing). The first (or last) chunk's share still has only
    its own pass to hide behind. With v = 1 this is :func:`comms.exposed_time` of one pass.

    Parameters
    ----------
    communication : array_like
        The whole stage's collective time. [s]
    compute : array_like
        One micro-batch's pass (forward, or backward) through the whole stage. [s]
    chunks, spacing : array_like
        v, model chunks per device, and micro-batches per chunk turn. [1]
    overlap : array_like
        Share of the shorter of communication and compute that is hidden. [1]

    Returns
    -------
    ndarray
        The larger of the first chunk's exposed share and the whole collective's exposure
        over the window. [s]
    """
    c, v = np.asarray(communication, dtype=np.float64), np.asarray(chunks, dtype=np.float64)
    one_chunk = comms.exposed_time(c / v, compute / v, overlap)
    window = compute / v * (1.0 + (v - 1.0) * spacing)
    return np.maximum(one_chunk, comms.exposed_time(c, window, overlap))


def dp_times(
    workload: Workload, layouts: Layouts, m: FloatArray, micro_batch: MicroBatch
) -> tuple[FloatArray, FloatArray]:
    """Gross and exposed data-parallel time per step for ZeRO stages 0-3.

    Stage 0: one gradient all-reduce per step, behind the last micro-batch's backward.
    Stage 1: reduce-scatter behind that backward, parameter all-gather behind the next
    forward. Stage 2: reduce-scatter after every micro-batch's backward. Stage 3 (FSDP):
    every micro-batch all-gathers the weights for forward and again for backward and
    reduce-scatters the gradients (Rajbhandari et al. 2020, section 7: 3 Psi per step).
    """
    params, grads = _dp_gather_times(workload, layouts)
    backward, overlap = micro_batch.backward + micro_batch.recompute, workload.software.overlap
    # Megatron-Core's DDP and distributed optimizer (ZeRO 0 and 1) sync each model chunk on
    # its own; its FSDP and every other stack treat the stage as one chunk
    # (chunked_exposed_time of one chunk is comms.exposed_time behind one pass).
    chunked = workload.framework.mcore_ddp & (layouts.zero_stage <= 1)
    v = np.where(chunked, layouts.virtual_stages, 1.0)
    spacing = np.minimum(layouts.pp, m)
    exposed_grads = chunked_exposed_time(grads, backward, v, spacing, overlap)
    exposed_params = chunked_exposed_time(params, micro_batch.forward, v, spacing, overlap)
    all_reduce = ALL_REDUCE_PHASES * grads  # reduce-scatter + all-gather of the gradients
    exposed_all_reduce = chunked_exposed_time(all_reduce, backward, v, spacing, overlap)
    gross = _by_zero_stage(
        layouts.zero_stage,
        [all_reduce, grads + params, m * grads + params],
        m * (ZERO3_WEIGHT_GATHERS * params + grads),
    )
    zero3 = exposed_params + comms.exposed_time(params + grads, backward, overlap)
    exposed = _by_zero_stage(
        layouts.zero_stage,
        [
            exposed_all_reduce,
            exposed_grads + exposed_params,
            m * exposed_grads + exposed_params,
        ],
        m * zero3,
    )
    return gross, exposed


def _by_zero_stage(
    zero_stage: FloatArray, stages_0_to_2: list[FloatArray], stage_3: FloatArray
) -> FloatArray:
    """Per layout, the value of its ZeRO stage: ``np.select`` on the stage, as nested
    ``np.where`` (a selection, so the same values, at a fraction of np.select's cost)."""
    picked = stage_3
    for stage in (2, 1, 0):
        picked = np.where(zero_stage == stage, stages_0_to_2[stage], picked)
    return picked


def optimizer_parameters(workload: Workload, layouts: Layouts) -> FloatArray:
    """Parameters one device's optimizer step updates: its (ZeRO-sharded) share of the
    trained weights, or of the adapters."""
    dp_cp = layouts.dp * layouts.cp
    sharded = layouts.zero_stage >= 1
    if workload.method.adapters:
        return memory.sharded(_adapter_parameters(workload, layouts), dp_cp, sharded)
    dense, expert = memory.stage_parameters(workload.model, layouts.tp, layouts.pp, layouts.ep)
    share = finetune.trained_share(workload.model, workload.method)
    return share * (
        memory.sharded(dense, dp_cp, sharded) + memory.sharded(expert, dp_cp / layouts.ep, sharded)
    )


def offload_times(
    workload: Workload, layouts: Layouts, tokens: FloatArray, micro_batch: MicroBatch
) -> tuple[FloatArray, FloatArray]:
    """Host-transfer time left on the critical path, (per micro-batch, per step). [s]

    Activation offload copies each micro-batch's saved activations to the host during the
    forward and back during the backward, each copy beside its pass. Parameter offload
    streams the stage's 16-bit weights in for the forward and again for the backward.
    Optimizer offload moves the device's gradient shard out and its updated 16-bit weights
    back every step, and runs Adam on the host CPU (Ren et al. 2021, "ZeRO-Offload",
    section 4.1), which replaces the device's optimizer step.
    """
    link, overlap = workload.host_link_bandwidth, workload.software.overlap
    per_micro_batch = np.zeros_like(micro_batch.forward)
    if np.any(layouts.activation_offload > 0):  # the layout search never offloads: skip the work
        saved = offloaded_activation_bytes(
            workload.model,
            tokens,
            layouts.tp,
            layouts.pp,
            layouts.sequence_parallel,
            layouts.recompute,
            workload.activation_bytes,
            workload.framework.flash_attention,
            workload.framework.dropout,
        )
        copy = np.where(layouts.activation_offload > 0, saved / link, 0.0)
        per_micro_batch = comms.exposed_time(
            copy, micro_batch.forward, overlap
        ) + comms.exposed_time(copy, micro_batch.backward + micro_batch.recompute, overlap)
    code = memory.OFFLOAD_CODES[workload.offload]
    if code >= 2:
        dense, expert = memory.stage_parameters(workload.model, layouts.tp, layouts.pp, layouts.ep)
        weight_bytes = memory.bytes_per_parameter(workload.precision)[0]
        stream = (
            finetune.base_weight_bytes(workload.model, workload.method, weight_bytes)
            * (dense + expert)
            / link
        )
        per_micro_batch = per_micro_batch + comms.exposed_time(stream, micro_batch.forward, overlap)
        per_micro_batch = per_micro_batch + comms.exposed_time(
            stream, micro_batch.backward + micro_batch.recompute, overlap
        )
    per_step = np.zeros_like(micro_batch.forward)
    if code >= 1:
        parameters = optimizer_parameters(workload, layouts)
        weight_bytes, gradient_bytes, _ = memory.bytes_per_parameter(
            workload.precision, workload.optimizer, workload.method.adapters
        )
        cpu_adam = compute.optimizer_bytes(workload, parameters)
        per_step = (
            parameters * (weight_bytes + gradient_bytes) / link
            + cpu_adam / workload.software.cpu_adam_bytes_per_s
        )
    return per_micro_batch, per_step
