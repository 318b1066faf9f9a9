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

from estimator.core import comms, compute, finetune, memory
from estimator.core import model as arithmetic
from estimator.core._types import FloatArray, Numeric
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
        """Broadcast the given columns to one common length (every field required but
        ``activation_offload``, 0 when absent)."""
        names = [f.name for f in dataclasses.fields(cls)]
        columns = {"activation_offload": 0.0, **columns}
        arrays = np.broadcast_arrays(
            *(np.atleast_1d(np.asarray(columns[n], dtype=np.float64)) for n in names)
        )
        return cls(**{n: np.array(a) for n, a in zip(names, arrays, strict=True)})

    @classmethod
    def single(cls, layout: ParallelismConfig) -> Layouts:
        """The one layout of an explicit scenario."""
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


def _micro_batch(w: Workload, lay: Layouts, tokens: FloatArray, layers: FloatArray) -> _MicroBatch:
    gemm_flop, gemm_byte = compute.layer_gemm_time(w, tokens, lay.tp, lay.ep)
    attention = compute.attention_forward_time(w, tokens, lay.tp)
    forward_elem = compute.elementwise_time(w, tokens, lay.tp, lay.sequence_parallel, "forward")
    backward_elem = compute.elementwise_time(w, tokens, lay.tp, lay.sequence_parallel, "backward")
    head_flop, head_byte = compute.lm_head_time(w, tokens, lay.tp)
    overhead = w.software.layer_overhead_s * w.efficiency.layer_overhead_scale
    casts = compute.fp8_cast_time(w, tokens, lay.tp, lay.ep)
    forward_elem, backward_elem = forward_elem + casts / 2, backward_elem + casts / 2
    # Training method (finetune): adapters add their skinny matmuls, QLoRA dequantises the
    # weights before each pass; frozen weights skip their weight-gradient matmul, and layers
    # below every trained weight skip the backward altogether.
    adapter_flop, adapter_byte = compute.adapter_gemm_time(w, tokens, lay.tp, lay.ep)
    dequantize = compute.dequantize_time(w, lay.tp, lay.ep)
    through = finetune.backward_layer_share(w.model, w.method)
    gemm_backward = through + finetune.weight_gradient_layer_share(w.model, w.method)
    adapters = adapter_flop + adapter_byte
    forward_layer = gemm_flop + gemm_byte + attention + forward_elem + adapters + dequantize
    backward_layer = gemm_backward * (gemm_flop + gemm_byte) + through * (
        compute.ATTENTION_BACKWARD_FACTOR * attention
        + backward_elem
        + 2 * adapters
        + dequantize
        + overhead
    )
    recompute_layer = through * np.where(
        lay.recompute == 2, forward_layer, np.where(lay.recompute == 1, attention, 0.0)
    )
    memory_layer = (1 + gemm_backward) * gemm_byte + forward_elem + backward_elem + dequantize
    head_backward = 2.0 if finetune.head_trained(w.model, w.method) else 1.0
    balance = _stage_share(
        w,
        lay,
        layers,
        forward_layer + backward_layer + recompute_layer,
        (1 + head_backward) / 3 * (head_flop + head_byte),
    )
    return _MicroBatch(
        forward=balance * (layers * forward_layer + head_flop / 3 + head_byte / 3),
        backward=balance * (layers * backward_layer + head_backward * (head_flop + head_byte) / 3),
        recompute=balance * layers * recompute_layer,
        attention=layers * (1 + through * compute.ATTENTION_BACKWARD_FACTOR) * attention,
        memory_bound=layers * memory_layer + head_byte,
    )


def _stage_share(
    w: Workload, lay: Layouts, layers: FloatArray, layer_time: FloatArray, head_time: FloatArray
) -> FloatArray:
    """Time of the slowest stage relative to "its layers + the LM head".

    The split is :func:`memory.pipeline_split`: k = ceil(l / p) layers on the middle stages,
    fewer on the ends, the last also running the LM head and loss. The slowest stage runs
    max(k layers, last-stage layers + head); with p = 1 that is all layers + head.
    """
    own = layers * layer_time + head_time
    last = memory.stage_layers(w.model.num_layers, lay.pp, "last")
    return np.maximum(layers * layer_time, last * layer_time + head_time) / own


def _group_link(w: Workload, size: Numeric, stride: Numeric) -> tuple[FloatArray, FloatArray]:
    e = w.efficiency
    return comms.link(
        comms.spans_nodes(size, stride, w.node_size),
        comms.members_per_node(size, stride, w.node_size),
        size,
        w.intra_node_bandwidth * e.intra_node_bandwidth,
        w.inter_node_bandwidth * e.inter_node_bandwidth,
        e.intra_node_latency_s,
        e.inter_node_latency_s,
    )


def _tp_time(w: Workload, lay: Layouts, tokens: FloatArray, layers: FloatArray) -> FloatArray:
    """Megatron TP collectives per micro-batch: per layer 2 all-reduces forward and 2
    backward (+2 with full recompute) of b s h values; sequence parallelism swaps each for an
    all-gather + reduce-scatter of equal cost (Korthikanti et al. 2022, section 4.2.2).
    """
    bandwidth, latency = _group_link(w, lay.tp, 1.0)
    size = tokens * w.model.hidden_size * w.activation_bytes
    count = np.where(lay.recompute == 2, 6.0, 4.0)
    return layers * count * comms.all_reduce_time(size, lay.tp, bandwidth, latency)


def _context_and_expert_time(
    w: Workload, lay: Layouts, tokens: FloatArray, layers: FloatArray, mb: _MicroBatch
) -> FloatArray:
    """Exposed ring-attention (cp) and expert all-to-all (ep) time per micro-batch."""
    md, e = w.model, w.activation_bytes
    bandwidth, latency = _group_link(w, lay.cp, lay.tp)
    kv = tokens * 2 * np.maximum(md.num_kv_heads / lay.tp, 1.0) * md.head_dim * e
    rounds = np.where(lay.recompute == 2, 4.0, 3.0)
    ring = layers * rounds * (lay.cp - 1) * comms.p2p_time(kv, bandwidth, latency)
    context = comms.exposed_time(ring, mb.attention, w.software.overlap)
    if md.moe is None:
        return context
    share = arithmetic.num_moe_layers(md) / md.num_layers
    bandwidth, latency = _group_link(w, lay.ep, lay.tp * lay.cp)
    size = tokens * md.moe.top_k * md.hidden_size * e / lay.tp
    count = np.where(lay.recompute == 2, 6.0, 4.0)
    return context + layers * share * count * comms.all_to_all_time(
        size, lay.ep, bandwidth, latency
    )


def _pipeline_p2p_time(w: Workload, lay: Layouts, tokens: FloatArray) -> FloatArray:
    """Stage-boundary sends per micro-batch: activations forward, gradients backward, once
    per model chunk (v of them when interleaved); split over t (Megatron's scatter-gather).
    """
    bandwidth, latency = _group_link(w, 2.0, lay.tp * lay.cp * lay.dp)
    size = tokens * w.model.hidden_size * w.activation_bytes / lay.tp
    per_micro_batch = 2.0 * lay.virtual_stages * comms.p2p_time(size, bandwidth, latency)
    return np.where(lay.pp > 1, per_micro_batch, 0.0)


def _dp_gather_times(w: Workload, lay: Layouts) -> tuple[FloatArray, FloatArray]:
    """All-gather time of the stage's weights and reduce-scatter time of its gradients
    over the data-parallel group (d c ranks; routed experts over d c / e).

    Each volume moves as one collective per layer of the stage (FSDP units, DDP buckets),
    so the latency is paid per layer. Gradients are reduced in the training precision, and
    only for what is trained (the adapters under LoRA); weights move at their stored size
    (NF4 under QLoRA, plus the adapters).
    """
    wbytes, gbytes, _ = memory.bytes_per_parameter(w.precision, w.optimizer, w.method.adapters)
    dense, expert = memory.stage_parameters(w.model, lay.tp, lay.pp, lay.ep)
    dp_cp = lay.dp * lay.cp
    collectives = memory.layers_per_stage(w.model.num_layers, lay.pp) + 1.0
    bw, lat = _group_link(w, dp_cp, lay.tp)
    bw_e, lat_e = _group_link(w, dp_cp / lay.ep, lay.tp * lay.ep)
    adapters = _adapter_parameters(w, lay)

    def gather(dense_bytes: FloatArray, expert_bytes: FloatArray) -> FloatArray:
        return comms.all_gather_time(
            dense_bytes, dp_cp, bw, lat * collectives
        ) + comms.all_gather_time(expert_bytes, dp_cp / lay.ep, bw_e, lat_e * collectives)

    base = finetune.base_weight_bytes(w.model, w.method, wbytes)
    weights = gather(base * dense + wbytes * adapters, base * expert)
    if w.method.adapters:
        return weights, gather(gbytes * adapters, 0.0 * adapters)
    share = finetune.trained_share(w.model, w.method)
    return weights, gather(share * gbytes * dense, share * gbytes * expert)


def _adapter_parameters(w: Workload, lay: Layouts) -> FloatArray:
    """LoRA adapter parameters one device of the busiest stage holds (0 without). [1]"""
    per_layer = finetune.adapter_parameters(w.model, w.method) / w.model.num_layers
    return per_layer * memory.layers_per_stage(w.model.num_layers, lay.pp) / lay.tp


def _dp_times(
    w: Workload, lay: Layouts, m: FloatArray, mb: _MicroBatch
) -> tuple[FloatArray, FloatArray]:
    """Gross and exposed data-parallel time per step for ZeRO stages 0-3.

    Stage 0: one gradient all-reduce per step, behind the last micro-batch's backward.
    Stage 1: reduce-scatter behind that backward, parameter all-gather behind the next
    forward. Stage 2: reduce-scatter after every micro-batch's backward. Stage 3 (FSDP):
    every micro-batch all-gathers the weights for forward and again for backward and
    reduce-scatters the gradients (Rajbhandari et al. 2020, section 7: 3 Psi per step).
    """
    params, grads = _dp_gather_times(w, lay)
    backward, overlap = mb.backward + mb.recompute, w.software.overlap
    exposed_grads = comms.exposed_time(grads, backward, overlap)
    exposed_params = comms.exposed_time(params, mb.forward, overlap)
    stages = [lay.zero_stage == 0, lay.zero_stage == 1, lay.zero_stage == 2]
    gross = np.select(
        stages, [2 * grads, grads + params, m * grads + params], m * (2 * params + grads)
    )
    zero3 = exposed_params + comms.exposed_time(params + grads, backward, overlap)
    exposed = np.select(
        stages,
        [
            comms.exposed_time(2 * grads, backward, overlap),
            exposed_grads + exposed_params,
            m * exposed_grads + exposed_params,
        ],
        m * zero3,
    )
    return gross, exposed


def _stage_memory(
    w: Workload, lay: Layouts, tokens: FloatArray, m: FloatArray, stage: str
) -> tuple[FloatArray, ...]:
    weights, gradients, optimizer = memory.model_state_bytes(
        w.model, w.precision, lay.tp, lay.pp, lay.dp * lay.cp, lay.ep, lay.zero_stage, w.offload,
        stage, w.method, w.optimizer, w.master_weights,
    )  # fmt: skip
    activations = memory.activation_bytes(
        w.model,
        tokens,
        lay.tp,
        lay.pp,
        lay.sequence_parallel,
        lay.recompute,
        m,
        lay.virtual_stages,
        w.activation_bytes,
        lay.activation_offload,
        w.efficiency.logits_bytes,
        stage,
        w.method,
    ) * finetune.backward_layer_share(w.model, w.method)
    tensors = weights + gradients + optimizer + activations
    e = w.efficiency
    other = memory.allowance_bytes(tensors, e.reserved_memory_gib * memory.GIB, e.fragmentation)
    return weights, gradients, optimizer, activations, other, tensors + other


def _memory(w: Workload, lay: Layouts, tokens: FloatArray, m: FloatArray) -> tuple[FloatArray, ...]:
    """Memory parts of the pipeline stage that needs the most (first, second or last: see
    :data:`memory.STAGES`); with pp = 1 the three are the same device."""
    deepest = float(np.max(lay.pp))
    # Without pipelining the three are one device; with two stages the second is the last.
    stages = memory.STAGES if deepest > 2 else ("first", "last") if deepest > 1 else ("first",)
    per_stage = [_stage_memory(w, lay, tokens, m, stage) for stage in stages]
    if len(per_stage) == 1:
        return per_stage[0]
    worst = np.argmax(np.stack([parts[5] for parts in per_stage]), axis=0)
    return tuple(
        np.choose(worst, [parts[i] for parts in per_stage]) for i in range(len(per_stage[0]))
    )


def _optimizer_parameters(w: Workload, lay: Layouts) -> FloatArray:
    """Parameters one device's optimizer step updates: its (ZeRO-sharded) share of the
    trained weights, or of the adapters."""
    dp_cp = lay.dp * lay.cp
    sharded = lay.zero_stage >= 1
    if w.method.adapters:
        return memory.sharded(_adapter_parameters(w, lay), dp_cp, sharded)
    dense, expert = memory.stage_parameters(w.model, lay.tp, lay.pp, lay.ep)
    share = finetune.trained_share(w.model, w.method)
    return share * (
        memory.sharded(dense, dp_cp, sharded) + memory.sharded(expert, dp_cp / lay.ep, sharded)
    )


def _offload_times(
    w: Workload, lay: Layouts, tokens: FloatArray, mb: _MicroBatch
) -> tuple[FloatArray, FloatArray]:
    """Host-transfer time left on the critical path, (per micro-batch, per step). [s]

    Activation offload copies each micro-batch's saved activations to the host during the
    forward and back during the backward, each copy beside its pass. Parameter offload
    streams the stage's 16-bit weights in for the forward and again for the backward.
    Optimizer offload moves the device's gradient shard out and its updated 16-bit weights
    back every step, and runs Adam on the host CPU (Ren et al. 2021, "ZeRO-Offload",
    section 4.1), which replaces the device's optimizer step.
    """
    link, overlap = w.host_link_bandwidth, w.software.overlap
    per_micro_batch = np.zeros_like(mb.forward)
    if np.any(lay.activation_offload > 0):  # the layout search never offloads: skip the work
        saved = memory.offloaded_activation_bytes(
            w.model, tokens, lay.tp, lay.pp, lay.sequence_parallel, lay.recompute,
            w.activation_bytes,
        )  # fmt: skip
        copy = np.where(lay.activation_offload > 0, saved / link, 0.0)
        per_micro_batch = comms.exposed_time(copy, mb.forward, overlap) + comms.exposed_time(
            copy, mb.backward + mb.recompute, overlap
        )
    code = memory.OFFLOAD_CODES[w.offload]
    if code >= 2:
        dense, expert = memory.stage_parameters(w.model, lay.tp, lay.pp, lay.ep)
        wbytes = memory.bytes_per_parameter(w.precision)[0]
        stream = finetune.base_weight_bytes(w.model, w.method, wbytes) * (dense + expert) / link
        per_micro_batch = per_micro_batch + comms.exposed_time(stream, mb.forward, overlap)
        per_micro_batch = per_micro_batch + comms.exposed_time(
            stream, mb.backward + mb.recompute, overlap
        )
    per_step = np.zeros_like(mb.forward)
    if code >= 1:
        parameters = _optimizer_parameters(w, lay)
        wbytes, gbytes, _ = memory.bytes_per_parameter(w.precision, w.optimizer, w.method.adapters)
        cpu_adam = compute.optimizer_bytes(w, parameters)
        per_step = (
            parameters * (wbytes + gbytes) / link + cpu_adam / w.software.cpu_adam_bytes_per_s
        )
    return per_micro_batch, per_step


def _compiler_remat(
    w: Workload,
    lay: Layouts,
    tokens: FloatArray,
    layers: FloatArray,
    m: FloatArray,
    mb: _MicroBatch,
    parts: tuple[FloatArray, ...],
) -> tuple[_MicroBatch, tuple[FloatArray, ...]]:
    """XLA's rematerialisation pass: where the saved activations do not fit, the compiler
    recomputes more of the forward instead of failing (XLA HLO rematerialization, run when a
    program exceeds the device's memory). The share f of the gap between the layout's
    activations and those of full recomputation that must go is dropped, and f of the
    extra recompute time is paid: a linear interpolation towards full recomputation.
    """
    full = dataclasses.replace(lay, recompute=np.full_like(lay.recompute, 2.0))
    full_parts = _memory(w, full, tokens, m)
    capacity = w.usable_memory
    gap = parts[5] - full_parts[5]
    over = parts[5] - capacity
    share = np.where((over > 0) & (gap > 0), np.clip(over / np.where(gap > 0, gap, 1.0), 0, 1), 0)
    if not np.any(share > 0):
        return mb, parts
    full_recompute = _micro_batch(w, full, tokens, layers).recompute
    mb = dataclasses.replace(mb, recompute=mb.recompute + share * (full_recompute - mb.recompute))
    mixed = tuple(p - share * (p - f) for p, f in zip(parts, full_parts, strict=True))
    return mb, mixed


def evaluate_layouts(w: Workload, lay: Layouts) -> LayoutResults:
    """Memory and step time of every layout in ``lay`` for the scenario ``w``.

    One optimizer step runs m = ceil(B / (dp b)) micro-batches through each pipeline. The
    1F1B bubble is (p - 1) micro-batch times, (p - 1)/v interleaved (Narayanan et al. 2021,
    section 2.2), i.e. (p - 1)/(m v) of the pipeline's busy time.
    """
    m = np.ceil(w.global_batch_size / (lay.dp * lay.micro_batch_size))
    tokens = lay.micro_batch_size * w.model.seq_len / lay.cp
    layers = memory.layers_per_stage(w.model.num_layers, lay.pp)
    mb = _micro_batch(w, lay, tokens, layers)
    memory_parts = _memory(w, lay, tokens, m)
    if w.efficiency.compiler_remat or w.framework.compiler_remat:
        mb, memory_parts = _compiler_remat(w, lay, tokens, layers, m, mb, memory_parts)
    # Tensor-parallel collectives split into chunks and pipelined with the matmuls they feed
    # (Megatron-LM --tp-comm-overlap, PyTorch async TP, XLA collective matmul): a share
    # tp_overlap of them hides behind the matmul time (Wang et al. 2022, "Overlap
    # Communication with Dependent Computation via Decomposition", ASPLOS '23).
    # Only inside the fast domain: the chunked pipelining needs the NVLink-class latency
    # (Megatron-LM's userbuffers, PyTorch async TP), and only where the framework has it.
    tp_overlap = np.where(
        lay.tp <= w.node_size, w.efficiency.tp_overlap * float(w.framework.tp_overlap), 0.0
    )
    tp_comm = comms.exposed_time(
        _tp_time(w, lay, tokens, layers), mb.forward + mb.backward, tp_overlap
    )
    serial_comm = _context_and_expert_time(w, lay, tokens, layers, mb)
    serial_comm = serial_comm + _pipeline_p2p_time(w, lay, tokens)
    dp_gross, dp_exposed = _dp_times(w, lay, m, mb)
    offload_micro_batch, offload_step = _offload_times(w, lay, tokens, mb)
    if w.offload == "none":
        optimizer = compute.optimizer_time(w, _optimizer_parameters(w, lay))
    else:
        optimizer = offload_step
    busy = mb.forward + mb.backward + mb.recompute + tp_comm + offload_micro_batch
    bubble = (lay.pp - 1) / lay.virtual_stages * busy
    exposed = m * serial_comm + dp_exposed
    base = m * busy + bubble + exposed + optimizer
    # The two margins add to the step: framework overhead everywhere, network jitter as a
    # share that grows with the cluster (workload.network_jitter_scale).
    framework_overhead = w.margins.framework_overhead * base
    jitter = w.margins.network_jitter * w.jitter_scale * base
    overheads = framework_overhead + jitter
    return LayoutResults(
        num_micro_batches=m,
        tokens_per_step=m * lay.dp * lay.micro_batch_size * w.model.seq_len,
        weights=memory_parts[0],
        gradients=memory_parts[1],
        optimizer=memory_parts[2],
        activations=memory_parts[3],
        other=memory_parts[4],
        total_memory=memory_parts[5],
        compute=m * (mb.forward + mb.backward) + optimizer,
        recompute=m * mb.recompute,
        tp_communication=m * tp_comm,
        pp_bubble=bubble,
        dp_communication=dp_gross,
        exposed_communication=exposed,
        overheads=overheads,
        framework_overhead=framework_overhead,
        network_jitter=jitter,
        step_time=base + overheads,
        memory_bound=m * mb.memory_bound + optimizer,
    )
