"""Layouts as a struct of arrays, and the one implementation of the per-layout formulas.

``estimate`` evaluates a single layout through :func:`evaluate_layouts`; a layout search
evaluates thousands at once through the same function, so the two always agree. Every
field of :class:`Layouts` is a float64 array (integers are exact up to 2**53) and every
result is an array of the same length.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from estimator.core import comms, compute, finetune, memory, pipeline
from estimator.core import model as arithmetic
from estimator.core._types import FloatArray, Numeric
from estimator.core.activations import activation_bytes, offloaded_activation_bytes
from estimator.core.constants import (
    ALL_REDUCE_PHASES,
    BACKWARD_TO_FORWARD,
    CP_EXCHANGES_BACKWARD,
    CP_EXCHANGES_FORWARD,
    EP_ALL_TO_ALLS_BACKWARD,
    EP_ALL_TO_ALLS_FORWARD,
    FORWARD_BACKWARD_PASSES,
    MCORE_BUCKET_MIN_PARAMETERS,
    MCORE_BUCKET_PARAMETERS_PER_RANK,
    PIPELINE_SENDS_PER_MICRO_BATCH,
    TP_COLLECTIVES_BACKWARD,
    TP_COLLECTIVES_FORWARD,
    ZERO3_WEIGHT_GATHERS,
)
from estimator.core.scenario import ParallelismConfig
from estimator.core.workload import Workload


@dataclass(frozen=True)
class Layouts:
    """Parallel layouts, one per index: the contract's ``parallelism`` fields as arrays.

    ``recompute`` is coded 0 none, 1 selective, 2 full; ``sequence_parallel`` and
    ``activation_offload`` 0/1; ``virtual_stages`` is 1 for 1F1B and v > 1 for the
    interleaved schedule.
    """

    tp: FloatArray
    pp: FloatArray
    dp: FloatArray
    cp: FloatArray
    ep: FloatArray
    micro_batch_size: FloatArray
    zero_stage: FloatArray
    recompute: FloatArray
    sequence_parallel: FloatArray
    virtual_stages: FloatArray
    activation_offload: FloatArray

    @classmethod
    def from_arrays(cls, **columns: Numeric) -> Layouts:
        """Broadcast the given columns to one common length.

        Parameters
        ----------
        **columns : array_like
            Every field of :class:`Layouts` by name (sizes [devices], ``micro_batch_size``
            [sequences], codes as in the class docstring); ``activation_offload`` may be
            left out (0).

        Returns
        -------
        Layouts
            float64 arrays of one common length.
        """
        names = [f.name for f in dataclasses.fields(cls)]
        columns = {"activation_offload": 0.0, **columns}
        arrays = np.broadcast_arrays(
            *(np.atleast_1d(np.asarray(columns[n], dtype=np.float64)) for n in names)
        )
        return cls(**{n: np.array(a) for n, a in zip(names, arrays, strict=True)})

    @classmethod
    def single(cls, layout: ParallelismConfig) -> Layouts:
        """The one layout of an explicit scenario.

        Parameters
        ----------
        layout : ParallelismConfig
            The scenario's ``parallelism``; sequence parallelism counts only with tp > 1.

        Returns
        -------
        Layouts
            Arrays of length 1.
        """
        return cls.from_arrays(
            tp=layout.tp,
            pp=layout.pp,
            dp=layout.dp,
            cp=layout.cp,
            ep=layout.ep,
            micro_batch_size=layout.micro_batch_size,
            zero_stage=layout.zero_stage,
            recompute=memory.RECOMPUTE_CODES[layout.recompute],
            sequence_parallel=float(layout.sequence_parallel and layout.tp > 1),
            virtual_stages=layout.virtual_stages,
            activation_offload=float(layout.activation_offload),
        )

    def __len__(self) -> int:
        return int(self.tp.shape[0])


@dataclass(frozen=True)
class LayoutResults:
    """Per-layout results; memory in bytes, times in seconds per optimizer step.

    The step time is compute + recompute + tp_communication (its exposed part) + pp_bubble +
    exposed_communication + overheads, the overheads being the two margins
    (``framework_overhead`` + ``network_jitter``); ``dp_communication`` is the gross data-parallel
    traffic time, of which only the part in ``exposed_communication`` costs time.
    """

    num_micro_batches: FloatArray
    tokens_per_step: FloatArray
    weights: FloatArray
    gradients: FloatArray
    optimizer: FloatArray
    activations: FloatArray
    other: FloatArray
    total_memory: FloatArray
    compute: FloatArray
    recompute: FloatArray
    tp_communication: FloatArray
    pp_bubble: FloatArray
    dp_communication: FloatArray
    exposed_communication: FloatArray
    overheads: FloatArray
    framework_overhead: FloatArray
    network_jitter: FloatArray
    step_time: FloatArray
    memory_bound: FloatArray


@dataclass(frozen=True)
class _MicroBatch:
    """Per-device, per-micro-batch times of the most loaded stage. [s]"""

    forward: FloatArray
    backward: FloatArray
    recompute: FloatArray
    attention: FloatArray
    memory_bound: FloatArray


def _per_layer_count(forward: float, backward: float, recompute: FloatArray) -> FloatArray:
    """Collectives per layer and micro-batch: those of the forward and the backward, plus
    the forward's again where full recomputation re-runs it (Korthikanti et al. 2022,
    section 5). [1]"""
    full = recompute == memory.FULL_RECOMPUTE
    return np.where(full, forward + backward + forward, forward + backward)


def _micro_batch(
    workload: Workload, layouts: Layouts, tokens: FloatArray, layers: FloatArray
) -> _MicroBatch:
    """Forward, backward, recompute and attention times of one micro-batch on the most
    loaded stage, in forward-pass units: a matmul's backward is its input gradient plus,
    where the weight trains, its weight gradient (Narayanan et al. 2021, backward = 2 x
    forward); FlashAttention's backward is 2.5 x its forward (Dao 2023), unfused attention's
    four matmuls and softmax backward (:func:`compute.unfused_attention_times`). [s]"""
    gemm_flop, gemm_byte = compute.layer_gemm_time(workload, tokens, layouts.tp, layouts.ep)
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
    casts = compute.fp8_cast_time(workload, tokens, layouts.tp, layouts.ep)
    forward_elem, backward_elem = forward_elem + casts / 2, backward_elem + casts / 2
    # Training method (finetune): adapters add their skinny matmuls, QLoRA dequantises the
    # weights before each pass; frozen weights skip their weight-gradient matmul, and layers
    # below every trained weight skip the backward altogether.
    adapter_flop, adapter_byte = compute.adapter_gemm_time(workload, tokens, layouts.tp, layouts.ep)
    dequantize = compute.dequantize_time(workload, layouts.tp, layouts.ep)
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
    return _MicroBatch(
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


def _tp_time(
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


def _context_and_expert_time(
    workload: Workload,
    layouts: Layouts,
    tokens: FloatArray,
    layers: FloatArray,
    micro_batch: _MicroBatch,
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
    shared = layers * passes * compute.shared_expert_time(workload, tokens, layouts.tp)
    overlap = workload.software.overlap * float(workload.framework.shared_expert_overlap)
    return context + comms.exposed_time(all_to_all, shared, overlap)


def _pipeline_p2p_time(workload: Workload, layouts: Layouts, tokens: FloatArray) -> FloatArray:
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


def _dp_times(
    workload: Workload, layouts: Layouts, m: FloatArray, micro_batch: _MicroBatch
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
    stages = [layouts.zero_stage == 0, layouts.zero_stage == 1, layouts.zero_stage == 2]
    all_reduce = ALL_REDUCE_PHASES * grads  # reduce-scatter + all-gather of the gradients
    exposed_all_reduce = chunked_exposed_time(all_reduce, backward, v, spacing, overlap)
    gross = np.select(
        stages,
        [all_reduce, grads + params, m * grads + params],
        m * (ZERO3_WEIGHT_GATHERS * params + grads),
    )
    zero3 = exposed_params + comms.exposed_time(params + grads, backward, overlap)
    exposed = np.select(
        stages,
        [
            exposed_all_reduce,
            exposed_grads + exposed_params,
            m * exposed_grads + exposed_params,
        ],
        m * zero3,
    )
    return gross, exposed


def _stage_memory(
    workload: Workload, layouts: Layouts, tokens: FloatArray, m: FloatArray, stage: str
) -> tuple[FloatArray, ...]:
    """Memory parts of one pipeline ``stage``: (weights, gradients, optimizer, activations,
    other, total). [B]"""
    weights, gradients, optimizer = memory.model_state_bytes(
        workload.model,
        workload.precision,
        layouts.tp,
        layouts.pp,
        layouts.dp * layouts.cp,
        layouts.ep,
        layouts.zero_stage,
        workload.offload,
        stage,
        workload.method,
        workload.optimizer,
        workload.master_weights,
    )
    activations = activation_bytes(
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
        stage,
        workload.method,
        workload.framework.flash_attention,
        workload.framework.dropout,
    ) * finetune.backward_layer_share(workload.model, workload.method)
    tensors = weights + gradients + optimizer + activations
    efficiency = workload.efficiency
    reserved = efficiency.reserved_memory_gib * memory.GIB
    other = memory.allowance_bytes(tensors, reserved, efficiency.fragmentation)
    return weights, gradients, optimizer, activations, other, tensors + other


def _memory(
    workload: Workload, layouts: Layouts, tokens: FloatArray, m: FloatArray
) -> tuple[FloatArray, ...]:
    """Memory parts of the pipeline stage that needs the most (first, second or last: see
    :data:`pipeline.STAGES`); with pp = 1 the three are the same device."""
    deepest = float(np.max(layouts.pp))
    # Without pipelining the three are one device; with two stages the second is the last.
    stages = pipeline.STAGES if deepest > 2 else ("first", "last") if deepest > 1 else ("first",)
    per_stage = [_stage_memory(workload, layouts, tokens, m, stage) for stage in stages]
    if len(per_stage) == 1:
        return per_stage[0]
    worst = np.argmax(np.stack([parts[5] for parts in per_stage]), axis=0)
    return tuple(
        np.choose(worst, [parts[i] for parts in per_stage]) for i in range(len(per_stage[0]))
    )


def _optimizer_parameters(workload: Workload, layouts: Layouts) -> FloatArray:
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


def _offload_times(
    workload: Workload, layouts: Layouts, tokens: FloatArray, micro_batch: _MicroBatch
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
        parameters = _optimizer_parameters(workload, layouts)
        weight_bytes, gradient_bytes, _ = memory.bytes_per_parameter(
            workload.precision, workload.optimizer, workload.method.adapters
        )
        cpu_adam = compute.optimizer_bytes(workload, parameters)
        per_step = (
            parameters * (weight_bytes + gradient_bytes) / link
            + cpu_adam / workload.software.cpu_adam_bytes_per_s
        )
    return per_micro_batch, per_step


def _compiler_remat(
    workload: Workload,
    layouts: Layouts,
    tokens: FloatArray,
    layers: FloatArray,
    m: FloatArray,
    micro_batch: _MicroBatch,
    parts: tuple[FloatArray, ...],
) -> tuple[_MicroBatch, tuple[FloatArray, ...]]:
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
        _tp_time(workload, layouts, tokens, layers),
        micro_batch.forward + micro_batch.backward,
        tp_overlap,
    )
    serial_comm = _context_and_expert_time(workload, layouts, tokens, layers, micro_batch)
    serial_comm = serial_comm + _pipeline_p2p_time(workload, layouts, tokens)
    dp_gross, dp_exposed = _dp_times(workload, layouts, m, micro_batch)
    offload_micro_batch, offload_step = _offload_times(workload, layouts, tokens, micro_batch)
    if workload.offload == "none":
        optimizer = compute.optimizer_time(workload, _optimizer_parameters(workload, layouts))
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
