"""Matmul time of one micro-batch on one device: the roofline, tiles and the layer's shapes.

Matmuls follow an additive roofline: t = F / (P eps_gemm) + B / (W eps_mem), with F the
FLOPs, B the bytes read and written (inputs, weights, output), P the dense peak and W the
memory bandwidth (Williams, Waterman & Patterson 2009, "Roofline", CACM 52(4), with the two
terms added rather than maxed so small or skinny shapes - small h/t, few tokens per
micro-batch - run further from peak).

Every matmul dimension is padded up to the matmul unit's tile before its FLOPs are timed
(tile quantization, NVIDIA "Matrix Multiplication Background User's Guide", 2023): a
dimension that is not a multiple of the tile - an unpadded vocabulary, a head count split
unevenly, a few tokens per expert - runs further from peak. fp8 matmuls run at the
family's fp8 efficiency times the scaling recipe's relative speed.

Training methods add their own matmul traffic here too: LoRA's adapter matmuls, QLoRA's
dequantisation and fp8's casts. All functions take broadcastable numpy arrays for the
layout parameters; the rest of a micro-batch (attention, memory-bound kernels, the LM head
and the optimizer) is :mod:`estimator.core.compute`.
"""

from __future__ import annotations

import numpy as np

from estimator.core import finetune
from estimator.core import model as arithmetic
from estimator.core._types import FloatArray, Numeric
from estimator.core.constants import (
    BITS_PER_BYTE,
    FLOPS_PER_MULTIPLY_ADD,
    FP8_BYTES,
    HALF_PRECISION_BYTES,
)
from estimator.core.scenario import ModelConfig
from estimator.core.workload import Workload

#: fp8 cast traffic per activation or output-gradient value: the transposed fp8 copy the
#: weight-gradient matmul needs, written and read back (1 + 1 B). [B]
FP8_ACTIVATION_CAST_BYTES = 2.0 * FP8_BYTES
#: fp8 cast traffic per weight and micro-batch: read the 16-bit weight, write its fp8 copy
#: and the copy's transpose (2 + 1 + 1 B). [B]
FP8_WEIGHT_CAST_BYTES = HALF_PRECISION_BYTES + 2.0 * FP8_BYTES


def memory_rate(workload: Workload) -> float:
    """Achievable memory bandwidth, W eps_mem. [B/s]"""
    return workload.memory_bandwidth * workload.efficiency.memory_bandwidth


def matmul_efficiency(workload: Workload) -> float:
    """Fraction of the precision's dense peak a large matmul reaches (eps_gemm).

    fp8: the family's fp8 fraction times the recipe's speed relative to per-tensor scaling;
    block scaling is native (factor 1) where the tensor cores apply the scales (MXFP8).

    Parameters
    ----------
    workload : Workload
        The scenario's constants: precision, fp8 recipe and the family's efficiencies.

    Returns
    -------
    float
        eps_gemm. [1]
    """
    efficiency = workload.efficiency
    if workload.precision != "fp8":
        return efficiency.gemm
    if workload.fp8_recipe == "blockwise" and efficiency.native_block_fp8:
        return efficiency.fp8_gemm_fraction
    recipe_speed = dict(workload.software.fp8_recipe_gemm)[workload.fp8_recipe]
    return efficiency.fp8_gemm_fraction * recipe_speed


def padded(dimension: Numeric, tile: float) -> FloatArray:
    """``dimension`` rounded up to a multiple of ``tile`` (tile quantization).

    Parameters
    ----------
    dimension : array_like
        A matmul dimension. [elements]
    tile : float
        Side of the matmul unit's tile (128 on tensor-core GPUs). [elements]

    Returns
    -------
    ndarray
        ceil(dimension / tile) tile. [elements]

    References
    ----------
    NVIDIA, "Matrix Multiplication Background User's Guide", 2023: tile quantization.
    """
    return np.ceil(np.asarray(dimension, dtype=np.float64) / tile - 1e-9) * tile


def gemm_flop_time(
    workload: Workload, m: Numeric, k: Numeric, n: Numeric, sixteen_bit: bool = False
) -> FloatArray:
    """Arithmetic part of an (m x k) @ (k x n) matmul, each dimension padded to the tile.

    Parameters
    ----------
    workload : Workload
        The scenario's constants: matmul peak P, eps_gemm and the tile.
    m, k, n : array_like
        Matmul dimensions (m: rows, usually tokens). [elements]
    sixteen_bit : bool, optional
        A matmul that fp8 training keeps in 16 bits (the LM head): the 16-bit peak and
        ``gemm``. The same as the others when the precision is not fp8.

    Returns
    -------
    ndarray
        2 m' k' n' / (P eps_gemm), primes for padded dimensions. [s]

    References
    ----------
    Williams, Waterman & Patterson 2009, "Roofline: An Insightful Visual Performance Model
    for Multicore Architectures", CACM 52(4); Narayanan et al. 2021, section 5.1 (2 FLOPs
    per multiply-accumulate).
    """
    tile = workload.efficiency.matmul_tile
    flops = FLOPS_PER_MULTIPLY_ADD * padded(m, tile) * padded(k, tile) * padded(n, tile)
    if sixteen_bit and workload.precision == "fp8":
        return flops / (workload.peak_16bit_flops * workload.efficiency.gemm)
    return flops / (workload.peak_matmul_flops * matmul_efficiency(workload))


def gemm_byte_time(
    workload: Workload, m: Numeric, k: Numeric, n: Numeric, sixteen_bit: bool = False
) -> FloatArray:
    """Memory part of the same matmul: its inputs, weights and output through memory.

    Parameters
    ----------
    workload : Workload
        The scenario's constants: precision, bytes per value e, bandwidth W and eps_mem.
    m, k, n : array_like
        Matmul dimensions, unpadded. [elements]
    sixteen_bit : bool, optional
        A matmul fp8 training keeps in 16 bits (:func:`gemm_flop_time`).

    Returns
    -------
    ndarray
        (e_in (m k + k n) + e m n) / (W eps_mem), with 1-byte inputs for fp8 matmuls
        (their output stays 16-bit) and e_in = e otherwise. [s]

    References
    ----------
    Williams, Waterman & Patterson 2009, "Roofline", CACM 52(4) (the memory term, added
    to the arithmetic one rather than maxed).
    """
    m, k = np.asarray(m, dtype=np.float64), np.asarray(k, dtype=np.float64)
    fp8 = workload.precision == "fp8" and not sixteen_bit
    inputs = FP8_BYTES if fp8 else workload.activation_bytes
    moved = inputs * (m * k + k * n) + workload.activation_bytes * m * n
    return moved / memory_rate(workload)


def gemm_exposed_byte_time(
    workload: Workload, m: Numeric, k: Numeric, n: Numeric, sixteen_bit: bool = False
) -> FloatArray:
    """The memory part of a matmul that its arithmetic does not hide.

    A tiled matmul streams its operands while it computes (roofline: the slower of the two
    sets the time), so the memory term counts only where it exceeds the arithmetic one:
    skinny and small matmuls. The maximum achievable matmul fractions the fits are capped
    at (:data:`estimator.core.calibration.HARDWARE_LIMITS`) are measured on whole kernels,
    operand traffic included, so adding the two terms would count that traffic twice.

    Parameters
    ----------
    workload : Workload
        The scenario's constants.
    m, k, n : array_like
        Matmul dimensions. [elements]
    sixteen_bit : bool, optional
        A matmul fp8 training keeps in 16 bits (:func:`gemm_flop_time`).

    Returns
    -------
    ndarray
        max(:func:`gemm_byte_time` - :func:`gemm_flop_time`, 0): with the flop part,
        max(flop, byte). [s]

    References
    ----------
    Williams, Waterman & Patterson 2009, "Roofline", CACM 52(4).
    """
    return gemm_times(workload, m, k, n, sixteen_bit)[1]


def gemm_times(
    workload: Workload, m: Numeric, k: Numeric, n: Numeric, sixteen_bit: bool = False
) -> tuple[FloatArray, FloatArray]:
    """(:func:`gemm_flop_time`, :func:`gemm_exposed_byte_time`) of one matmul, the flop
    part worked out once for both. [s]"""
    flop = gemm_flop_time(workload, m, k, n, sixteen_bit)
    return flop, np.maximum(gemm_byte_time(workload, m, k, n, sixteen_bit) - flop, 0.0)


GemmShape = tuple[FloatArray, FloatArray, FloatArray, FloatArray, float]


def attention_gemm_shapes(model: ModelConfig, tp: FloatArray, one: FloatArray) -> list[GemmShape]:
    """The attention block's projections on one device (see :func:`layer_gemm_shapes`).

    Standard attention: the fused QKV projection (h to n_heads d_head / t + 2 n_kv d_head,
    the KV heads replicated when t exceeds them) and the output projection. Multi-head
    latent attention (Megatron-Core's MLA): the down-projections to the query latent and to
    the shared KV latent plus rotary key run whole on every tensor-parallel rank; the
    up-projections to each head's query, key and value, and the output projection, are
    split over t.
    """
    h = model.hidden_size * one
    q_width, out_width = model.attention_width * one, model.output_width * one
    out_projection: GemmShape = (one, out_width / tp, h, one, 1.0)
    mla = model.mla
    if mla is None:
        kv_width = arithmetic.kv_width_per_device(model, tp)
        return [(one, h, q_width / tp + kv_width, one, 1.0), out_projection]
    heads_kv = model.num_attention_heads * (mla.qk_nope_head_dim + mla.v_head_dim) * one
    shapes: list[GemmShape] = [
        (one, h, mla.latent_width * one, one, 1.0),
        (one, mla.kv_lora_rank * one, heads_kv / tp, one, 1.0),
        out_projection,
    ]
    query_input = mla.q_lora_rank * one if mla.q_lora_rank else h
    return [*shapes, (one, query_input, q_width / tp, one, 1.0)]


def layer_gemm_shapes(workload: Workload, tp: Numeric, ep: Numeric) -> list[GemmShape]:
    """The matmuls of one layer's forward on one device.

    ``rows per token`` scales the token count (expert matmuls see top-k routed tokens spread
    over the local experts); ``count`` is how many such matmuls run per layer (MoE layers
    weighted by their share of layers); ``slowdown`` multiplies their time: routed experts
    wait for the busiest expert and run as grouped matmuls,
    (1 + load imbalance) / grouped-GEMM efficiency.

    Parameters
    ----------
    workload : Workload
        The scenario's constants (model shape, MoE software factors).
    tp, ep : array_like
        Tensor- and expert-parallel sizes. [devices]

    Returns
    -------
    list of tuple
        (rows per token [rows/token], k [elements], n [elements], count [1], slowdown [1])
        for QKV, the output projection, FC1, FC2 and, for MoE, the router, routed and
        shared experts.
    """
    model = workload.model
    one = np.ones(np.broadcast(tp, ep).shape)
    tp, ep = one * tp, one * ep
    h, ffn = model.hidden_size * one, model.ffn_hidden_size * one
    up = 2.0 if model.gated_mlp else 1.0  # a gated MLP's gate and up run as one matmul
    dense = (1.0 - arithmetic.num_moe_layers(model) / model.num_layers) * one
    shapes = [
        *attention_gemm_shapes(model, tp, one),
        (one, h, up * ffn / tp, dense, 1.0),
        (one, ffn / tp, h, dense, 1.0),
    ]
    if model.moe is not None:
        software = workload.software
        f, moe = model.moe.expert_ffn_hidden_size * one, 1.0 - dense
        rows = model.moe.top_k * ep / model.moe.num_experts
        experts = moe * model.moe.num_experts / ep
        routed_slowdown = (1.0 + software.moe_load_imbalance) / software.grouped_gemm
        shapes += [
            (one, h, model.moe.num_experts * one, moe, 1.0),  # router logits
            (rows, h, up * f / tp, experts, routed_slowdown),
            (rows, f / tp, h, experts, routed_slowdown),
            *shared_expert_shapes(model, tp, one),
        ]
    return shapes


def shared_expert_shapes(model: ModelConfig, tp: FloatArray, one: FloatArray) -> list[GemmShape]:
    """The shared experts' matmuls of one layer's forward on one device (none without MoE or
    shared experts), weighted by the MoE layers' share of layers: every token runs them, up
    (and gate) then down, split over the tensor-parallel group. Same tuple as
    :func:`layer_gemm_shapes`."""
    if model.moe is None or model.moe.num_shared_experts == 0:
        return []
    up = 2.0 if model.gated_mlp else 1.0
    h, f = model.hidden_size * one, model.moe.expert_ffn_hidden_size * one
    shared = arithmetic.num_moe_layers(model) / model.num_layers * model.moe.num_shared_experts
    return [(one, h, up * f / tp, shared * one, 1.0), (one, f / tp, h, shared * one, 1.0)]


def shared_expert_time(workload: Workload, tokens: Numeric, tp: Numeric) -> FloatArray:
    """Forward time of one layer's shared experts for one micro-batch (MoE-layer weighted),
    the compute the expert all-to-alls can hide behind. [s]"""
    one = np.ones(np.broadcast(tokens, tp).shape)
    total: FloatArray = np.zeros_like(one)
    for rows, k, n, count, slowdown in shared_expert_shapes(workload.model, one * tp, one):
        m = rows * np.asarray(tokens, dtype=np.float64)
        flop, exposed_bytes = gemm_times(workload, m, k, n)
        total = total + count * slowdown * (flop + exposed_bytes)
    return total


def layer_gemm_time(
    workload: Workload, tokens: Numeric, tp: Numeric, ep: Numeric
) -> tuple[FloatArray, FloatArray]:
    """Forward matmul time of one layer for one micro-batch, split (flop part, byte part).

    The backward is twice the forward (data and weight gradients have the same shapes);
    the caller applies that factor.

    Parameters
    ----------
    workload : Workload
        The scenario's constants.
    tokens : array_like
        Tokens of the micro-batch on this device, b s / cp. [tokens]
    tp, ep : array_like
        Tensor- and expert-parallel sizes. [devices]

    Returns
    -------
    tuple of ndarray
        (:func:`gemm_flop_time`, :func:`gemm_exposed_byte_time`) summed over
        :func:`layer_gemm_shapes`. [s]
    """
    flop_part: FloatArray = np.zeros(np.broadcast(tokens, tp, ep).shape)
    byte_part: FloatArray = np.zeros_like(flop_part)
    for rows, k, n, count, slowdown in layer_gemm_shapes(workload, tp, ep):
        m = rows * np.asarray(tokens, dtype=np.float64)
        flop, exposed_bytes = gemm_times(workload, m, k, n)
        flop_part = flop_part + count * slowdown * flop
        byte_part = byte_part + count * slowdown * exposed_bytes
    return flop_part, byte_part


def adapter_gemm_time(
    workload: Workload, tokens: Numeric, tp: Numeric, ep: Numeric
) -> tuple[FloatArray, FloatArray]:
    """Forward time of one layer's LoRA adapters for one micro-batch, (flop, byte) parts.

    Each adapted (d_in x d_out) matrix gains x A (d_in x r) and (x A) B (r x d_out), split
    over tp like the matrix they adapt (column-parallel: B's output; row-parallel: A's
    input); routed experts' adapters see the top-k tokens routed to each of the device's
    E / ep experts. The skinny shapes run at the roofline of their padded tiles; their
    backward is twice the forward (both gradients), applied by the caller.

    Parameters
    ----------
    workload : Workload
        The scenario's constants (method: rank r and targets).
    tokens : array_like
        Tokens of the micro-batch on this device. [tokens]
    tp, ep : array_like
        Tensor- and expert-parallel sizes. [devices]

    Returns
    -------
    tuple of ndarray
        (flop part, byte part); 0 without adapters. [s]

    References
    ----------
    Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models", section 4.1.
    """
    shape = np.broadcast(tokens, tp, ep).shape
    flop_part, byte_part = np.zeros(shape), np.zeros(shape)
    tokens = np.asarray(tokens, dtype=np.float64)
    tp, ep = np.asarray(tp, dtype=np.float64), np.asarray(ep, dtype=np.float64)
    r, model = float(workload.method.rank), workload.model
    for matrix in finetune.adapted_matrices(model, workload.method):
        split_out = (matrix.d_in, matrix.d_out / tp)  # column-parallel
        split_in = (matrix.d_in / tp, matrix.d_out)  # row-parallel
        d_in, d_out = split_out if matrix.column else split_in
        groups: list[tuple[FloatArray, FloatArray, float]] = [
            (tokens, matrix.dense + 0.0 * ep, 1.0)
        ]
        if model.moe is not None and matrix.routed:
            software = workload.software
            rows = tokens * model.moe.top_k * ep / model.moe.num_experts
            slowdown = (1.0 + software.moe_load_imbalance) / software.grouped_gemm
            groups.append((rows, matrix.routed / ep, slowdown))
        for m, count, slowdown in groups:
            for k, n in ((d_in, r), (r, d_out)):
                flop, exposed_bytes = gemm_times(workload, m, k, n)
                flop_part = flop_part + count * slowdown * flop
                byte_part = byte_part + count * slowdown * exposed_bytes
    return flop_part, byte_part


def dequantize_time(workload: Workload, tp: Numeric, ep: Numeric) -> FloatArray:
    """QLoRA: dequantising one layer's NF4 weights to 16 bits before a pass's matmuls.

    Read NF4_BITS / 8, write 2 B per weight (the matmul's own read of the 16-bit copy is in
    :func:`gemm_byte_time`), memory-bound.

    Parameters
    ----------
    workload : Workload
        The scenario's constants (method).
    tp, ep : array_like
        Tensor- and expert-parallel sizes. [devices]

    Returns
    -------
    ndarray
        0 for other methods. [s]

    References
    ----------
    Dettmers et al. 2023, "QLoRA: Efficient Finetuning of Quantized LLMs", section 3.
    """
    shape = np.broadcast(tp, ep).shape
    if workload.method.type != "qlora":
        return np.zeros(shape)
    weights = np.zeros(shape)
    for _, k, n, count, _ in layer_gemm_shapes(workload, tp, ep):
        weights = weights + count * np.asarray(k, dtype=np.float64) * n
    moved = weights * (finetune.NF4_BITS / BITS_PER_BYTE + workload.activation_bytes)
    return moved / memory_rate(workload)


def fp8_cast_time(workload: Workload, tokens: Numeric, tp: Numeric, ep: Numeric) -> FloatArray:
    """Quantisation traffic of fp8 training for one layer and micro-batch.

    Frameworks fuse the cast of each matmul input into the kernel that produces it (the
    LayerNorm, the activation function, the previous matmul's epilogue: NVIDIA Transformer
    Engine's LayerNormLinear and cast-transpose kernels), so activations and output
    gradients cost only the transposed fp8 copy Hopper's fp8 matmuls need for the
    weight-gradient product (:data:`FP8_ACTIVATION_CAST_BYTES` per value). Weights are cast
    once per micro-batch (:data:`FP8_WEIGHT_CAST_BYTES` per value). The recipe scales the
    traffic (row- and block-wise scaling read each input once more for its amax).

    Parameters
    ----------
    workload : Workload
        The scenario's constants (precision, fp8 recipe).
    tokens : array_like
        Tokens of the micro-batch on this device. [tokens]
    tp, ep : array_like
        Tensor- and expert-parallel sizes. [devices]

    Returns
    -------
    ndarray
        0 unless the precision is fp8. [s]

    References
    ----------
    Micikevicius et al. 2022, "FP8 Formats for Deep Learning", arXiv:2209.05433, section 4.
    """
    if workload.precision != "fp8":
        return np.zeros(np.broadcast(tokens, tp, ep).shape)
    values = np.zeros(np.broadcast(tokens, tp, ep).shape)
    weights = np.zeros_like(values)
    for rows, k, n, count, _ in layer_gemm_shapes(workload, tp, ep):
        values = values + count * rows * np.asarray(tokens, dtype=np.float64) * (np.asarray(k) + n)
        weights = weights + count * np.asarray(k, dtype=np.float64) * n
    recipe = dict(workload.software.fp8_recipe_casts)[workload.fp8_recipe]
    moved = FP8_ACTIVATION_CAST_BYTES * values + FP8_WEIGHT_CAST_BYTES * weights
    return recipe * moved / memory_rate(workload)
