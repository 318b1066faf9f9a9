"""Compute time of one micro-batch on one device: matmuls, attention, memory-bound kernels.

Matmuls follow an additive roofline: t = F / (P eps_gemm) + B / (W eps_mem), with F the
FLOPs, B the bytes read and written (inputs, weights, output), P the dense peak and W the
memory bandwidth (Williams, Waterman & Patterson 2009, "Roofline", CACM 52(4), with the two
terms added rather than maxed so small or skinny shapes - small h/t, few tokens per
micro-batch - run further from peak). Attention runs at the FlashAttention efficiency on the
FLOPs the kernel executes (causal tiles skipped: half the non-causal count; the backward
recomputes the scores: 2.5 x forward, Dao 2023 "FlashAttention-2", section 3). LayerNorm,
activation functions and residual adds are memory-bound.

Every matmul dimension is padded up to the matmul unit's tile before its FLOPs are timed
(tile quantization, NVIDIA "Matrix Multiplication Background User's Guide", 2023): a
dimension that is not a multiple of the tile - an unpadded vocabulary, a head count split
unevenly, a few tokens per expert - runs further from peak. fp8 matmuls run at the
family's fp8 efficiency times the scaling recipe's relative speed.

All functions take broadcastable numpy arrays for the layout parameters.
"""

from __future__ import annotations

import numpy as np

from estimator.core import finetune
from estimator.core import model as arithmetic
from estimator.core._types import FloatArray, Numeric
from estimator.core.workload import Workload

#: FlashAttention backward executes 2.5 x its forward FLOPs (5 matmuls against 2).
ATTENTION_BACKWARD_FACTOR = 2.5
#: Share of the s x s score tiles a causal FlashAttention kernel computes.
CAUSAL_FRACTION = 0.5


def matmul_efficiency(w: Workload) -> float:
    """Fraction of the precision's dense peak a large matmul reaches (eps_gemm). [1]

    fp8: the family's fp8 fraction times the recipe's speed relative to per-tensor scaling;
    block scaling is native (factor 1) where the tensor cores apply the scales (MXFP8).
    """
    e = w.efficiency
    if w.precision != "fp8":
        return e.gemm
    if w.fp8_recipe == "blockwise" and e.native_block_fp8:
        return e.fp8_gemm_fraction
    return e.fp8_gemm_fraction * dict(w.software.fp8_recipe_gemm)[w.fp8_recipe]


def padded(dimension: Numeric, tile: float) -> FloatArray:
    """``dimension`` rounded up to a multiple of ``tile`` (tile quantization). [1]"""
    return np.ceil(np.asarray(dimension, dtype=np.float64) / tile - 1e-9) * tile


def gemm_flop_time(w: Workload, m: Numeric, k: Numeric, n: Numeric) -> FloatArray:
    """Arithmetic part of an (m x k) @ (k x n) matmul: 2 m' k' n' / (P eps_gemm), each
    dimension padded to the matmul tile. [s]"""
    tile = w.efficiency.matmul_tile
    flops = 2.0 * padded(m, tile) * padded(k, tile) * padded(n, tile)
    return flops / (w.peak_matmul_flops * matmul_efficiency(w))


def gemm_byte_time(w: Workload, m: Numeric, k: Numeric, n: Numeric) -> FloatArray:
    """Memory part of the same matmul: (e_in (m k + k n) + e m n) / (W eps_mem), with
    1-byte inputs for fp8 matmuls (their output stays 16-bit) and e_in = e otherwise. [s]"""
    m, k = np.asarray(m, dtype=np.float64), np.asarray(k, dtype=np.float64)
    inputs = 1.0 if w.precision == "fp8" else w.activation_bytes
    moved = inputs * (m * k + k * n) + w.activation_bytes * m * n
    return moved / (w.memory_bandwidth * w.efficiency.memory_bandwidth)


GemmShape = tuple[FloatArray, FloatArray, FloatArray, FloatArray, float]


def layer_gemm_shapes(w: Workload, tp: Numeric, ep: Numeric) -> list[GemmShape]:
    """The matmuls of one layer's forward on one device as (rows per token, k, n, count,
    slowdown).

    ``rows per token`` scales the token count (expert matmuls see top-k routed tokens spread
    over the local experts); ``count`` is how many such matmuls run per layer (MoE layers
    weighted by their share of layers); ``slowdown`` multiplies their time: routed experts
    wait for the busiest expert and run as grouped matmuls,
    (1 + load imbalance) / grouped-GEMM efficiency.
    """
    md = w.model
    one = np.ones(np.broadcast(tp, ep).shape)
    tp, ep = one * tp, one * ep
    h, ffn, q_width = md.hidden_size * one, md.ffn_hidden_size * one, md.attention_width * one
    kv_width = np.maximum(md.num_kv_heads / tp, 1.0) * md.head_dim
    up = 2.0 if md.gated_mlp else 1.0
    dense = (1.0 - arithmetic.num_moe_layers(md) / md.num_layers) * one
    shapes: list[GemmShape] = [
        (one, h, q_width / tp + 2 * kv_width, one, 1.0),
        (one, q_width / tp, h, one, 1.0),
        (one, h, up * ffn / tp, dense, 1.0),
        (one, ffn / tp, h, dense, 1.0),
    ]
    if md.moe is not None:
        sw = w.software
        f, moe = md.moe.expert_ffn_hidden_size * one, 1.0 - dense
        rows = md.moe.top_k * ep / md.moe.num_experts
        experts = moe * md.moe.num_experts / ep
        shared = moe * md.moe.num_shared_experts
        routed_slowdown = (1.0 + sw.moe_load_imbalance) / sw.grouped_gemm
        shapes += [
            (one, h, md.moe.num_experts * one, moe, 1.0),  # router logits
            (rows, h, up * f / tp, experts, routed_slowdown),
            (rows, f / tp, h, experts, routed_slowdown),
            (one, h, up * f / tp, shared, 1.0),
            (one, f / tp, h, shared, 1.0),
        ]
    return shapes


def layer_gemm_time(
    w: Workload, tokens: Numeric, tp: Numeric, ep: Numeric
) -> tuple[FloatArray, FloatArray]:
    """Forward matmul time of one layer for one micro-batch, split (flop part, byte part).

    Backward is twice the forward (data and weight gradients have the same shapes). [s]
    """
    flop_part: FloatArray = np.zeros(np.broadcast(tokens, tp, ep).shape)
    byte_part: FloatArray = np.zeros_like(flop_part)
    for rows, k, n, weight, slowdown in layer_gemm_shapes(w, tp, ep):
        m = rows * np.asarray(tokens, dtype=np.float64)
        flop_part = flop_part + weight * slowdown * gemm_flop_time(w, m, k, n)
        byte_part = byte_part + weight * slowdown * gemm_byte_time(w, m, k, n)
    return flop_part, byte_part


def attention_forward_time(w: Workload, tokens: Numeric, tp: Numeric) -> FloatArray:
    """FlashAttention forward of one layer: CAUSAL_FRACTION x 4 (b s/cp) s (n_heads d_head) / t
    FLOPs at P_16 eps_attention (Dao et al. 2022). [s]
    """
    md = w.model
    flops = 4.0 * np.asarray(tokens, dtype=np.float64) * md.seq_len * md.attention_width / tp
    return CAUSAL_FRACTION * flops / (w.peak_attention_flops * w.efficiency.attention)


def elementwise_values_per_token(
    w: Workload, tp: Numeric, sequence_parallel: Numeric, passes: str
) -> FloatArray:
    """Values read + written by the memory-bound kernels of one layer per token.

    Forward: two LayerNorms (2h each), two residual adds (3h each), the activation function
    (2f, gated 3f); backward: LayerNorms 6h, residuals 6h, activation 3f (gated 5f). Values
    of width h are split over t only with sequence parallelism; f is always split. MoE
    layers also permute each token to its k experts and back (read h, write k h, and the
    reverse, in each pass: 2 (1 + k) h), and their activation functions act on the k routed
    plus shared experts' widths instead of f.
    """
    md = w.model
    h = md.hidden_size / np.where(sequence_parallel, tp, 1.0)
    tp = np.asarray(tp, dtype=np.float64)
    act_fwd, act_bwd = (3.0, 5.0) if md.gated_mlp else (2.0, 3.0)
    act_width = md.ffn_hidden_size / tp
    permute = 0.0 * h
    if md.moe is not None:
        share = arithmetic.num_moe_layers(md) / md.num_layers
        routed = (md.moe.top_k + md.moe.num_shared_experts) * md.moe.expert_ffn_hidden_size
        act_width = ((1.0 - share) * md.ffn_hidden_size + share * routed) / tp
        permute = share * 2.0 * (1.0 + md.moe.top_k) * h
    if passes == "forward":
        return 10.0 * h + act_fwd * act_width + permute
    return 12.0 * h + act_bwd * act_width + permute


def elementwise_time(
    w: Workload, tokens: Numeric, tp: Numeric, sequence_parallel: Numeric, passes: str
) -> FloatArray:
    """Memory-bound kernel time of one layer for one micro-batch ('forward'/'backward'). [s]"""
    values = elementwise_values_per_token(w, tp, sequence_parallel, passes)
    moved = np.asarray(tokens, dtype=np.float64) * values * w.activation_bytes
    return moved / (w.memory_bandwidth * w.efficiency.memory_bandwidth)


def lm_head_time(w: Workload, tokens: Numeric, tp: Numeric) -> tuple[FloatArray, FloatArray]:
    """LM head (forward + backward) and cross-entropy for one micro-batch, (flop, byte) parts.

    The vocabulary is split over t (Megatron vocab-parallel); the loss streams the fp32
    logits about five times (write, softmax read/write, gradient read/write): 20 V/t B/token.
    """
    md = w.model
    n = md.vocab_size / np.asarray(tp, dtype=np.float64)
    flop_part = 3.0 * gemm_flop_time(w, tokens, md.hidden_size, n)
    loss_bytes = 20.0 * np.asarray(tokens, dtype=np.float64) * n
    bandwidth = w.memory_bandwidth * w.efficiency.memory_bandwidth
    return flop_part, 3.0 * gemm_byte_time(w, tokens, md.hidden_size, n) + loss_bytes / bandwidth


def optimizer_bytes(w: Workload, parameters: Numeric) -> FloatArray:
    """Bytes one optimizer step streams over the parameters a device updates.

    AdamW in mixed precision moves ``optimizer_bytes_per_parameter`` (read and write its
    16 B of state plus the gradient); other optimizers and adapters in proportion to the
    state they keep (:func:`finetune.state_bytes`). [B]"""
    states = sum(
        finetune.state_bytes(w.precision, w.optimizer, w.method.adapters, w.master_weights)
    )
    scale = states / sum(finetune.state_bytes("bf16", "adamw", False))
    per_parameter = w.software.optimizer_bytes_per_parameter * scale
    return np.asarray(parameters, dtype=np.float64) * per_parameter


def optimizer_time(w: Workload, parameters: Numeric) -> FloatArray:
    """One optimizer step on the device, streamed from memory (:func:`optimizer_bytes`). [s]"""
    return optimizer_bytes(w, parameters) / (w.memory_bandwidth * w.efficiency.memory_bandwidth)


def adapter_gemm_time(
    w: Workload, tokens: Numeric, tp: Numeric, ep: Numeric
) -> tuple[FloatArray, FloatArray]:
    """Forward time of one layer's LoRA adapters for one micro-batch, (flop, byte) parts.

    Each adapted (d_in x d_out) matrix gains x A (d_in x r) and (x A) B (r x d_out), split
    over tp like the matrix they adapt (column-parallel: B's output; row-parallel: A's
    input); routed experts' adapters see the top-k tokens routed to each of the device's
    E / ep experts. The skinny shapes run at the roofline of their padded tiles; their
    backward is twice the forward (both gradients). [s]
    """
    shape = np.broadcast(tokens, tp, ep).shape
    flop_part, byte_part = np.zeros(shape), np.zeros(shape)
    tokens = np.asarray(tokens, dtype=np.float64)
    tp, ep = np.asarray(tp, dtype=np.float64), np.asarray(ep, dtype=np.float64)
    r, md = float(w.method.rank), w.model
    for a in finetune.adapted_matrices(md, w.method):
        d_in, d_out = (a.d_in, a.d_out / tp) if a.column else (a.d_in / tp, a.d_out)
        groups: list[tuple[FloatArray, FloatArray, float]] = [(tokens, a.dense + 0.0 * ep, 1.0)]
        if md.moe is not None and a.routed:
            sw = w.software
            rows = tokens * md.moe.top_k * ep / md.moe.num_experts
            groups.append((rows, a.routed / ep, (1.0 + sw.moe_load_imbalance) / sw.grouped_gemm))
        for m, count, slowdown in groups:
            for k, n in ((d_in, r), (r, d_out)):
                flop_part = flop_part + count * slowdown * gemm_flop_time(w, m, k, n)
                byte_part = byte_part + count * slowdown * gemm_byte_time(w, m, k, n)
    return flop_part, byte_part


def dequantize_time(w: Workload, tp: Numeric, ep: Numeric) -> FloatArray:
    """QLoRA: dequantising one layer's NF4 weights to 16 bits before a pass's matmuls
    (read NF4_BITS / 8, write 2 B per weight; the matmul's own read of the 16-bit copy is in
    :func:`gemm_byte_time`), memory-bound. 0 for other methods. [s]"""
    shape = np.broadcast(tp, ep).shape
    if w.method.type != "qlora":
        return np.zeros(shape)
    weights = np.zeros(shape)
    for _, k, n, count, _ in layer_gemm_shapes(w, tp, ep):
        weights = weights + count * np.asarray(k, dtype=np.float64) * n
    moved = weights * (finetune.NF4_BITS / 8.0 + w.activation_bytes)
    return moved / (w.memory_bandwidth * w.efficiency.memory_bandwidth)


def fp8_cast_time(w: Workload, tokens: Numeric, tp: Numeric, ep: Numeric) -> FloatArray:
    """Quantisation traffic of fp8 training for one layer and micro-batch (0 otherwise).

    Frameworks fuse the cast of each matmul input into the kernel that produces it (the
    LayerNorm, the activation function, the previous matmul's epilogue: NVIDIA Transformer
    Engine's LayerNormLinear and cast-transpose kernels), so activations and output
    gradients cost only the transposed fp8 copy Hopper's fp8 matmuls need for the
    weight-gradient product (write 1 B, read it back: 2 B per value). Weights are cast once
    per micro-batch (read 2 B, write 1 B and its 1 B transpose: 4 B per value). The recipe
    scales the traffic (row- and block-wise scaling read each input once more for its amax)
    (Micikevicius et al. 2022, "FP8 Formats for Deep Learning", section 4). [s]
    """
    if w.precision != "fp8":
        return np.zeros(np.broadcast(tokens, tp, ep).shape)
    values = np.zeros(np.broadcast(tokens, tp, ep).shape)
    weights = np.zeros_like(values)
    for rows, k, n, count, _ in layer_gemm_shapes(w, tp, ep):
        values = values + count * rows * np.asarray(tokens, dtype=np.float64) * (np.asarray(k) + n)
        weights = weights + count * np.asarray(k, dtype=np.float64) * n
    recipe = dict(w.software.fp8_recipe_casts)[w.fp8_recipe]
    bandwidth = w.memory_bandwidth * w.efficiency.memory_bandwidth
    return recipe * (2.0 * values + 4.0 * weights) / bandwidth
