"""Compute time of one micro-batch on one device: attention, memory-bound kernels, the LM
head and loss, and the optimizer step; the matmuls are :mod:`estimator.core.gemm`.

Attention runs at the FlashAttention efficiency on the FLOPs the kernel executes (causal
tiles skipped: half the non-causal count; the backward recomputes the scores: 2.5 x
forward, Dao 2023 "FlashAttention-2", section 3). LayerNorm, activation functions and
residual adds are memory-bound.

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
    CAUSAL_FRACTION,
    DROPOUT_MASK_BYTES,
    FORWARD_BACKWARD_PASSES,
    FP32_BYTES,
    HALF_PRECISION_BYTES,
    MIXED_PRECISION_ADAM_BYTES,
)
from estimator.core.gemm import gemm_times, memory_rate
from estimator.core.workload import Workload

#: Passes of the fp32 cross-entropy over the logits: write, softmax read and write,
#: gradient read and write. [1]
LOSS_LOGIT_PASSES = 5.0
#: Bytes the loss moves per logit, 5 passes of 4 B. [B]
LOSS_BYTES_PER_LOGIT = LOSS_LOGIT_PASSES * FP32_BYTES


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
    bandwidth = memory_rate(workload)
    forward = flops / rate + scores * forward_bytes / bandwidth
    backward = BACKWARD_TO_FORWARD * flops / rate + scores * backward_bytes / bandwidth
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
    return unfused * moved / memory_rate(workload)


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
    flop, exposed_bytes = gemm_times(workload, tokens, h, n, sixteen_bit=True)
    flop_part = FORWARD_BACKWARD_PASSES * flop
    loss_bytes = LOSS_BYTES_PER_LOGIT * np.asarray(tokens, dtype=np.float64) * n
    head_bytes = FORWARD_BACKWARD_PASSES * exposed_bytes
    return flop_part, head_bytes + loss_bytes / memory_rate(workload)


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
    return optimizer_bytes(workload, parameters) / memory_rate(workload)
