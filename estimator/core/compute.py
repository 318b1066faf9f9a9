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
from estimator.core.constants import (
    ATTENTION_BACKWARD_FACTOR,
    ATTENTION_SCORE_FORWARD_FLOPS,
    BACKWARD_TO_FORWARD,
    BITS_PER_BYTE,
    CAUSAL_FRACTION,
    DROPOUT_MASK_BYTES,
    FLOPS_PER_MULTIPLY_ADD,
    FORWARD_BACKWARD_PASSES,
    FP8_BYTES,
    FP32_BYTES,
    HALF_PRECISION_BYTES,
    MIXED_PRECISION_ADAM_BYTES,
)
from estimator.core.scenario import ModelConfig
from estimator.core.workload import Workload

#: Passes of the fp32 cross-entropy over the logits: write, softmax read and write,
#: gradient read and write. [1]
LOSS_LOGIT_PASSES = 5.0
#: Bytes the loss moves per logit, 5 passes of 4 B. [B]
LOSS_BYTES_PER_LOGIT = LOSS_LOGIT_PASSES * FP32_BYTES
#: fp8 cast traffic per activation or output-gradient value: the transposed fp8 copy the
#: weight-gradient matmul needs, written and read back (1 + 1 B). [B]
FP8_ACTIVATION_CAST_BYTES = 2.0 * FP8_BYTES
#: fp8 cast traffic per weight and micro-batch: read the 16-bit weight, write its fp8 copy
#: and the copy's transpose (2 + 1 + 1 B). [B]
FP8_WEIGHT_CAST_BYTES = HALF_PRECISION_BYTES + 2.0 * FP8_BYTES


def _memory_rate(workload: Workload) -> float:
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
    return moved / _memory_rate(workload)


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
    flop = gemm_flop_time(workload, m, k, n, sixteen_bit)
    return np.maximum(gemm_byte_time(workload, m, k, n, sixteen_bit) - flop, 0.0)


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
        total = total + count * slowdown * (
            gemm_flop_time(workload, m, k, n) + gemm_exposed_byte_time(workload, m, k, n)
        )
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
        flop_part = flop_part + count * slowdown * gemm_flop_time(workload, m, k, n)
        byte_part = byte_part + count * slowdown * gemm_exposed_byte_time(workload, m, k, n)
    return flop_part, byte_part


def attention_forward_time(workload: Workload, tokens: Numeric, tp: Numeric) -> FloatArray:
    """FlashAttention forward of one layer for one micro-batch.

    Parameters
    ----------
    workload : Workload
        The scenario's constants: s, n_heads d_head, the 16-bit peak P_16 and
        eps_attention.
    tokens : array_like
        Tokens of the micro-batch on this device, b s / cp. [tokens]
    tp : array_like
        Tensor-parallel size t (heads split over it). [devices]

    Returns
    -------
    ndarray
        CAUSAL_FRACTION x 4 (b s/cp) s (n_heads d_head) / t FLOPs at P_16 eps_attention. [s]

    References
    ----------
    Dao et al. 2022, "FlashAttention"; Dao 2023, "FlashAttention-2", section 3 (causal
    tiles skipped); Narayanan et al. 2021, eq. 3 (4 s h forward FLOPs per token).
    """
    model = workload.model
    flops = (
        ATTENTION_SCORE_FORWARD_FLOPS
        * np.asarray(tokens, dtype=np.float64)
        * model.seq_len
        * model.score_width
        / tp
    )
    return CAUSAL_FRACTION * flops / (workload.peak_attention_flops * workload.efficiency.attention)


def unfused_attention_times(
    workload: Workload, tokens: Numeric, tp: Numeric
) -> tuple[FloatArray, FloatArray]:
    """Attention of one layer for one micro-batch without FlashAttention: (forward,
    backward).

    The score and value matmuls run as batched GEMMs over every s x s score (no causal tile
    is skipped: the mask is applied to the full scores) at the 16-bit matmul efficiency;
    the backward runs four of them (dA, dV, dQ, dK). Between them the scores go through
    memory: forward, the score write, fused scale-mask-softmax read and write, dropout read,
    write and 1-byte mask where the profile trains with dropout, and the value matmul's
    read; backward, the probability gradient's write, dropout's read, mask and write, the
    softmax backward's reads of gradient and probabilities and its write, and the reads of
    the score gradient and probabilities by the three matmuls that consume them.

    Parameters are those of :func:`attention_forward_time`; the workload also supplies
    n_heads, eps_gemm, W eps_mem and the framework's ``dropout``.

    Returns
    -------
    (ndarray, ndarray)
        Forward and backward times. [s]

    References
    ----------
    Korthikanti et al. 2022, section 4.1 (the 5 a s / h bytes per token of softmax output,
    dropout mask and output that unfused attention stores); Dao et al. 2022, section 1 (the
    memory traffic FlashAttention removes).
    """
    model = workload.model
    tokens = np.asarray(tokens, dtype=np.float64)
    flops = ATTENTION_SCORE_FORWARD_FLOPS * tokens * model.seq_len * model.score_width / tp
    rate = workload.peak_attention_flops * workload.efficiency.gemm
    scores = tokens * model.seq_len * model.num_attention_heads / tp
    value = HALF_PRECISION_BYTES
    dropout = workload.framework.dropout
    mask = DROPOUT_MASK_BYTES if dropout else 0.0
    forward_bytes = value * (4.0 + (2.0 if dropout else 0.0)) + mask
    backward_bytes = value * (7.0 + (2.0 if dropout else 0.0)) + mask
    memory_rate = _memory_rate(workload)
    forward = flops / rate + scores * forward_bytes / memory_rate
    backward = BACKWARD_TO_FORWARD * flops / rate + scores * backward_bytes / memory_rate
    return forward, backward


def attention_times(
    workload: Workload, tokens: Numeric, tp: Numeric
) -> tuple[FloatArray, FloatArray]:
    """Attention of one layer for one micro-batch: (forward, backward). [s]

    FlashAttention (:func:`attention_forward_time`, backward 2.5 x forward) where the
    framework profile has it, else :func:`unfused_attention_times`.
    """
    if workload.framework.flash_attention:
        forward = attention_forward_time(workload, tokens, tp)
        return forward, ATTENTION_BACKWARD_FACTOR * forward
    return unfused_attention_times(workload, tokens, tp)


def elementwise_values_per_token(
    workload: Workload, tp: Numeric, sequence_parallel: Numeric, passes: str
) -> FloatArray:
    """Values read + written by the memory-bound kernels of one layer per token.

    Forward: two LayerNorms (2h each), two residual adds (3h each), the activation function
    (2f, gated 3f); backward: LayerNorms 6h, residuals 6h, activation 3f (gated 5f). Values
    of width h are split over t only with sequence parallelism; f is always split. MoE
    layers also permute each token to its k experts and back (read h, write k h, and the
    reverse, in each pass: 2 (1 + k) h), and their activation functions act on the k routed
    plus shared experts' widths instead of f.

    Parameters
    ----------
    workload : Workload
        The scenario's constants (model shape).
    tp : array_like
        Tensor-parallel size t. [devices]
    sequence_parallel : array_like of bool
        Whether width-h values are split over t.
    passes : {'forward', 'backward'}
        Which pass.

    Returns
    -------
    ndarray
        [values/token]
    """
    model = workload.model
    h = model.hidden_size / np.where(sequence_parallel, tp, 1.0)
    tp = np.asarray(tp, dtype=np.float64)
    act_fwd, act_bwd = (3.0, 5.0) if model.gated_mlp else (2.0, 3.0)
    act_width = model.ffn_hidden_size / tp
    permute = 0.0 * h
    if model.moe is not None:
        share = arithmetic.num_moe_layers(model) / model.num_layers
        routed = (model.moe.top_k + model.moe.num_shared_experts) * model.moe.expert_ffn_hidden_size
        act_width = ((1.0 - share) * model.ffn_hidden_size + share * routed) / tp
        permute = share * 2.0 * (1.0 + model.moe.top_k) * h
    if passes == "forward":
        return 10.0 * h + act_fwd * act_width + permute
    return 12.0 * h + act_bwd * act_width + permute


def elementwise_time(
    workload: Workload, tokens: Numeric, tp: Numeric, sequence_parallel: Numeric, passes: str
) -> FloatArray:
    """Memory-bound kernel time of one layer for one micro-batch.

    Parameters
    ----------
    workload : Workload
        The scenario's constants: bytes per value, W and eps_mem.
    tokens : array_like
        Tokens of the micro-batch on this device. [tokens]
    tp : array_like
        Tensor-parallel size t. [devices]
    sequence_parallel : array_like of bool
        Whether width-h values are split over t.
    passes : {'forward', 'backward'}
        Which pass.

    Returns
    -------
    ndarray
        tokens x :func:`elementwise_values_per_token` x e x (1 - f) / (W eps_mem), f the
        share the compiler fuses into the matmuls (``Efficiency.elementwise_fusion``). [s]
    """
    values = elementwise_values_per_token(workload, tp, sequence_parallel, passes)
    moved = np.asarray(tokens, dtype=np.float64) * values * workload.activation_bytes
    unfused = 1.0 - workload.efficiency.elementwise_fusion
    return unfused * moved / _memory_rate(workload)


def lm_head_time(workload: Workload, tokens: Numeric, tp: Numeric) -> tuple[FloatArray, FloatArray]:
    """LM head (forward + backward) and cross-entropy for one micro-batch.

    Three (b s/c) x h x V/t matmuls (forward, input and weight gradients); the vocabulary is
    split over t (Megatron vocab-parallel); the loss streams the fp32 logits five times
    (write, softmax read/write, gradient read/write): 20 V/t B per token. fp8 recipes keep
    the output layer in 16 bits (Transformer Engine through Megatron-Core casts only the
    transformer layers' linears; torchao's float8 conversion in torchtitan filters out the
    output projection), so its matmuls run at the 16-bit peak.

    Parameters
    ----------
    workload : Workload
        The scenario's constants.
    tokens : array_like
        Tokens of the micro-batch on this device. [tokens]
    tp : array_like
        Tensor-parallel size t. [devices]

    Returns
    -------
    tuple of ndarray
        (flop part, byte part incl. the loss). [s]

    References
    ----------
    Narayanan et al. 2021, eq. 3 (the V/12lh term: 6 V h FLOPs per token).
    """
    model = workload.model
    n = model.vocab_size / np.asarray(tp, dtype=np.float64)
    h = model.hidden_size
    flop_part = FORWARD_BACKWARD_PASSES * gemm_flop_time(workload, tokens, h, n, sixteen_bit=True)
    loss_bytes = LOSS_BYTES_PER_LOGIT * np.asarray(tokens, dtype=np.float64) * n
    head_bytes = FORWARD_BACKWARD_PASSES * gemm_exposed_byte_time(
        workload, tokens, h, n, sixteen_bit=True
    )
    return flop_part, head_bytes + loss_bytes / _memory_rate(workload)


def optimizer_bytes(workload: Workload, parameters: Numeric) -> FloatArray:
    """Bytes one optimizer step streams over the parameters a device updates.

    AdamW in mixed precision moves ``optimizer_bytes_per_parameter`` (read and write its
    16 B of state plus the gradient); other optimizers and adapters in proportion to the
    state they keep (:func:`finetune.state_bytes`).

    Parameters
    ----------
    workload : Workload
        The scenario's constants: precision, optimizer, method, master weights.
    parameters : array_like
        Parameters the device's optimizer step updates. [parameters]

    Returns
    -------
    ndarray
        [B]

    References
    ----------
    Rajbhandari et al. 2020, "ZeRO", section 3.1 (2 + 2 + 12 B of mixed-precision Adam
    state per parameter).
    """
    states = sum(
        finetune.state_bytes(
            workload.precision,
            workload.optimizer,
            workload.method.adapters,
            workload.master_weights,
        )
    )
    scale = states / MIXED_PRECISION_ADAM_BYTES
    per_parameter = workload.software.optimizer_bytes_per_parameter * scale
    return np.asarray(parameters, dtype=np.float64) * per_parameter


def optimizer_time(workload: Workload, parameters: Numeric) -> FloatArray:
    """One optimizer step on the device, streamed from memory.

    Parameters
    ----------
    workload : Workload
        The scenario's constants.
    parameters : array_like
        Parameters the device's optimizer step updates. [parameters]

    Returns
    -------
    ndarray
        :func:`optimizer_bytes` / (W eps_mem). [s]
    """
    return optimizer_bytes(workload, parameters) / _memory_rate(workload)


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
                flop_part = flop_part + count * slowdown * gemm_flop_time(workload, m, k, n)
                byte_part = byte_part + count * slowdown * gemm_exposed_byte_time(workload, m, k, n)
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
    return moved / _memory_rate(workload)


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
    return recipe * moved / _memory_rate(workload)
