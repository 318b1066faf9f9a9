"""Activation memory per device: what a layer keeps for its backward pass, the micro-batches
a pipeline rank holds in flight, the logits, and what an activation offload copies.

Every function takes the layout parameters as numpy arrays (or scalars) that broadcast
against each other, as in :mod:`estimator.core.memory`. Sizes are in bytes.

References
----------
Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
arXiv:2205.05198, section 4 and table 2 (activations per layer).
"""

from __future__ import annotations

import numpy as np

from estimator.core import finetune
from estimator.core import model as arithmetic
from estimator.core._types import FloatArray, Numeric
from estimator.core.constants import DROPOUT_MASK_BYTES
from estimator.core.memory import FULL_RECOMPUTE, NO_RECOMPUTE
from estimator.core.pipeline import layers_per_stage, stage_index, stage_layers
from estimator.core.scenario import MethodConfig, ModelConfig

#: Layers of saved activations an activation offload keeps on the device: the one being
#: computed and the one being copied (assumption). [layers]
OFFLOAD_RESIDENT_LAYERS = 2.0
#: Values of width h stored per token and layer outside the tensor-parallel regions: the
#: two LayerNorm inputs, the QKV input and the FC1 input (Korthikanti et al. 2022, section
#: 4.2.2: the 10 of s b h (10 + 24/t) less its two dropout masks). [values]
OUTSIDE_TP_VALUES = 4.0
#: Dropout masks of width h per token and layer: after the attention block and after the
#: MLP (Korthikanti et al. 2022, section 4.1). [masks]
DROPOUT_MASKS_PER_LAYER = 2.0


def activation_bytes_per_layer(
    model: ModelConfig,
    tokens: Numeric,
    tp: Numeric,
    sequence_parallel: Numeric,
    recompute: Numeric,
    bytes_per_value: float = 2.0,
    flash_attention: bool = True,
    dropout: bool = False,
    method: MethodConfig = finetune.FULL,
) -> FloatArray:
    """Activations one layer keeps for its backward pass, for one micro-batch on one device.

    Korthikanti et al. 2022, table 2, generalised to GQA, any FFN width and gated MLPs. With
    16-bit values and a standard GPT layer (f = 4h, n_kv = n_heads) it reduces to, per layer:
    s b h (34 + 5 a s / h) without parallelism or recompute; s b h (10 + 24/t + 5 a s/(h t))
    with tensor parallelism; s b h (34/t + 5 a s/(h t)) adding sequence parallelism;
    s b h 34/t with selective recompute; 2 s b h (/t with sequence parallelism) with full
    recompute. FlashAttention (Dao et al. 2022) never stores the s x s scores, so the 5as/h
    term is dropped unless ``flash_attention`` is False. The paper's constants include two
    1-byte dropout masks per token (2 s b h); current LLMs train without dropout, so they
    are left out unless ``dropout`` is True (34 becomes 32).

    Parameters
    ----------
    model : ModelConfig
        Transformer shape.
    tokens : array_like
        Tokens of the micro-batch on this device, b s / cp. [tokens]
    tp : array_like
        Tensor-parallel size t. [devices]
    sequence_parallel : array_like of bool
        Whether LayerNorm/dropout activations are split over t too.
    recompute : array_like of int
        0 none, 1 selective, 2 full (:data:`~estimator.core.memory.RECOMPUTE_CODES`).
    bytes_per_value : float
        Bytes of one activation value (2 for 16-bit, 4 for fp32); dropout masks are 1 byte.
        [B]
    flash_attention, dropout : bool
        Whether the s x s scores are never stored, and whether dropout masks are.
    method : MethodConfig
        LoRA adds its adapters' intermediates and dropout copies
        (:func:`finetune.adapter_activation_bytes_per_token`).

    Returns
    -------
    ndarray
        [B]

    References
    ----------
    Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
    Models", arXiv:2205.05198, section 4 and table 2.
    """
    tokens, tp = np.asarray(tokens, dtype=np.float64), np.asarray(tp, dtype=np.float64)
    recompute = np.asarray(recompute)
    h, value_bytes, heads = model.hidden_size, bytes_per_value, model.num_attention_heads
    masks = DROPOUT_MASKS_PER_LAYER * DROPOUT_MASK_BYTES if dropout else 0.0
    score_mask = DROPOUT_MASK_BYTES if dropout else 0.0
    outside = (
        tokens
        * h
        * (OUTSIDE_TP_VALUES * value_bytes + masks)
        / np.where(sequence_parallel, tp, 1.0)
    )
    # Q and the output projection's input, K and V (the heads of this device).
    widths = (model.attention_width + model.output_width) / tp + arithmetic.kv_width_per_device(
        model, tp
    )
    if model.mla is not None:
        # MLA also keeps the up-projections' inputs: the query and KV latents (with the
        # rotary key), whole on every tensor-parallel rank.
        widths = widths + model.mla.latent_width
    attention = tokens * value_bytes * widths
    mlp = tokens * value_bytes * _mlp_values_per_token(model) / tp
    # Softmax output and its dropped-out copy, plus the dropout mask, per score.
    scores = tokens * heads * model.seq_len * (2 * value_bytes + score_mask) / tp
    fixed, split = finetune.adapter_activation_bytes_per_token(model, method, value_bytes)
    adapters = fixed + split / tp
    stored = (
        outside
        + attention
        + mlp
        + tokens * adapters
        + np.where((recompute == NO_RECOMPUTE) & (not flash_attention), scores, 0.0)
    )
    layer_input = tokens * value_bytes * h / np.where(sequence_parallel, tp, 1.0)
    return np.where(recompute == FULL_RECOMPUTE, layer_input, stored)


def _mlp_values_per_token(model: ModelConfig) -> float:
    """MLP values stored per token: activation input and output (2 f), 3 f when gated
    (gate and up outputs and their product)."""
    per_width = 3 if model.gated_mlp else 2
    dense = per_width * model.ffn_hidden_size
    if model.moe is None:
        return float(dense)
    share = arithmetic.num_moe_layers(model) / model.num_layers
    routed = model.moe.top_k + model.moe.num_shared_experts
    moe = per_width * routed * model.moe.expert_ffn_hidden_size
    return (1 - share) * dense + share * moe


def micro_batches_in_flight(
    pp: Numeric, num_micro_batches: Numeric, virtual_stages: Numeric, stage: Numeric = 0.0
) -> FloatArray:
    """Micro-batches whose activations pipeline rank ``stage`` holds at peak.

    1F1B: rank i holds p - i. Interleaved with v model chunks per device, rank i runs
    2 (p - i - 1) + (v - 1) p + 1 chunk forwards before its first backward (Megatron-LM's
    warm-up count), i.e. p + (p - 1 - 2 i) / v micro-batches of its layers; for the first
    rank p (1 + (p - 1)/(p v)). Never more than the step's micro-batches; without
    pipelining (p = 1) gradient accumulation keeps one micro-batch at a time.

    Parameters
    ----------
    pp : array_like
        Pipeline-parallel size p. [stages]
    num_micro_batches : array_like
        Micro-batches per step and pipeline, m. [micro-batches]
    virtual_stages : array_like
        Model chunks per device v (1 for 1F1B). [1]
    stage : array_like
        Pipeline rank i, 0 for the first stage. [1]

    Returns
    -------
    ndarray
        [micro-batches]

    References
    ----------
    Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters
    Using Megatron-LM", section 2.2.1; Korthikanti et al. 2022, section 4.2.3.
    """
    pp, v = np.asarray(pp, dtype=np.float64), np.asarray(virtual_stages, dtype=np.float64)
    rank = np.asarray(stage, dtype=np.float64)
    interleaved = pp + (pp - 1.0 - 2.0 * rank) / v
    in_flight = np.minimum(np.where(v > 1, interleaved, pp - rank), num_micro_batches)
    return np.where(pp == 1, 1.0, np.maximum(in_flight, 1.0))


def logits_bytes(
    model: ModelConfig, tokens: Numeric, tp: Numeric, bytes_per_logit: float = 4.0
) -> FloatArray:
    """Logits kept for the cross-entropy backward on the last stage, e s b V / t.

    Parameters
    ----------
    model : ModelConfig
        Transformer shape (vocabulary V).
    tokens : array_like
        Tokens of the micro-batch on this device, b s / cp. [tokens]
    tp : array_like
        Tensor-parallel size t (vocab-parallel logits). [devices]
    bytes_per_logit : float
        e: 4 (fp32) in PyTorch frameworks, 2 where XLA fuses the loss. [B]

    Returns
    -------
    ndarray
        [B]

    References
    ----------
    Korthikanti et al. 2022, section 4.3.
    """
    return (
        bytes_per_logit
        * np.asarray(tokens, dtype=np.float64)
        * model.vocab_size
        / np.asarray(tp, dtype=np.float64)
    )


def activation_bytes(
    model: ModelConfig,
    tokens: Numeric,
    tp: Numeric,
    pp: Numeric,
    sequence_parallel: Numeric,
    recompute: Numeric,
    num_micro_batches: Numeric,
    virtual_stages: Numeric,
    bytes_per_value: float = 2.0,
    offloaded: Numeric = 0.0,
    bytes_per_logit: float = 4.0,
    stage: str = "first",
    method: MethodConfig = finetune.FULL,
    flash_attention: bool = True,
    dropout: bool = False,
) -> FloatArray:
    """Peak activation memory of a pipeline ``stage``.

    Its layers times the micro-batches it holds in flight, the logits on the last stage
    (and with p = 1), plus one layer's full working set under full recompute. With
    ``offloaded`` the saved activations live in host memory; the device keeps
    :data:`OFFLOAD_RESIDENT_LAYERS` layers of one micro-batch (the one being computed and
    the one being copied).

    Parameters
    ----------
    model : ModelConfig
        Transformer shape.
    tokens : array_like
        Tokens of the micro-batch on this device, b s / cp. [tokens]
    tp, pp : array_like
        Tensor- and pipeline-parallel sizes. [devices]
    sequence_parallel : array_like of bool
        Whether LayerNorm/dropout activations are split over t too.
    recompute : array_like of int
        0 none, 1 selective, 2 full (:data:`~estimator.core.memory.RECOMPUTE_CODES`).
    num_micro_batches : array_like
        Micro-batches per step and pipeline, m. [micro-batches]
    virtual_stages : array_like
        Model chunks per device v (1 for 1F1B). [1]
    bytes_per_value : float
        Bytes of one activation value. [B]
    offloaded : array_like
        1 where saved activations are offloaded to the host, else 0.
    bytes_per_logit : float
        Bytes per logit kept for the loss (:func:`logits_bytes`). [B]
    stage : str
        One of :data:`~estimator.core.pipeline.STAGES`.
    method : MethodConfig
        Training method (adapter activations).
    flash_attention, dropout : bool
        The framework's attention kernel and dropout (:func:`activation_bytes_per_layer`).

    Returns
    -------
    ndarray
        [B]

    References
    ----------
    Korthikanti et al. 2022, sections 4.2.3 and 4.3; Narayanan et al. 2021, section 2.2.1.
    """
    (held,) = stage_activation_bytes(
        model, tokens, tp, pp, sequence_parallel, recompute, num_micro_batches,
        virtual_stages, bytes_per_value, offloaded, bytes_per_logit, (stage,), method,
        flash_attention, dropout,
    )  # fmt: skip
    return held


def stage_activation_bytes(
    model: ModelConfig,
    tokens: Numeric,
    tp: Numeric,
    pp: Numeric,
    sequence_parallel: Numeric,
    recompute: Numeric,
    num_micro_batches: Numeric,
    virtual_stages: Numeric,
    bytes_per_value: float,
    offloaded: Numeric,
    bytes_per_logit: float,
    stages: tuple[str, ...],
    method: MethodConfig = finetune.FULL,
    flash_attention: bool = True,
    dropout: bool = False,
) -> list[FloatArray]:
    """:func:`activation_bytes` of each of ``stages``, one per stage.

    A layer's activations and the logits do not depend on the stage: they are worked out
    once for all the stages a layout evaluation compares.
    """
    pp = np.asarray(pp, dtype=np.float64)
    per_layer = activation_bytes_per_layer(
        model,
        tokens,
        tp,
        sequence_parallel,
        recompute,
        bytes_per_value,
        flash_attention,
        dropout,
        method,
    )
    working = np.where(
        np.asarray(recompute) == FULL_RECOMPUTE,
        activation_bytes_per_layer(
            model,
            tokens,
            tp,
            sequence_parallel,
            NO_RECOMPUTE,
            bytes_per_value,
            flash_attention,
            dropout,
            method,
        ),
        0.0,
    )
    on_host = np.asarray(offloaded) > 0
    logits = logits_bytes(model, tokens, tp, bytes_per_logit)
    held = []
    for stage in stages:
        layers = stage_layers(model.num_layers, pp, stage)
        rank = stage_index(stage, pp)
        in_flight = micro_batches_in_flight(pp, num_micro_batches, virtual_stages, rank)
        resident = np.minimum(layers, OFFLOAD_RESIDENT_LAYERS)
        stored = np.where(on_host, resident, in_flight * layers) * per_layer + working
        held.append(stored + np.where(rank == pp - 1, logits, 0.0))
    return held


def offloaded_activation_bytes(
    model: ModelConfig,
    tokens: Numeric,
    tp: Numeric,
    pp: Numeric,
    sequence_parallel: Numeric,
    recompute: Numeric,
    bytes_per_value: float = 2.0,
    flash_attention: bool = True,
    dropout: bool = False,
) -> FloatArray:
    """Saved activations of one micro-batch on the busiest stage, the volume an activation
    offload copies to the host in the forward pass and back in the backward pass.

    Parameters
    ----------
    model : ModelConfig
        Transformer shape.
    tokens : array_like
        Tokens of the micro-batch on this device, b s / cp. [tokens]
    tp, pp : array_like
        Tensor- and pipeline-parallel sizes. [devices]
    sequence_parallel : array_like of bool
        Whether LayerNorm/dropout activations are split over t too.
    recompute : array_like of int
        0 none, 1 selective, 2 full.
    bytes_per_value : float
        Bytes of one activation value. [B]
    flash_attention, dropout : bool
        The framework's attention kernel and dropout (:func:`activation_bytes_per_layer`).

    Returns
    -------
    ndarray
        ceil(l / p) layers of :func:`activation_bytes_per_layer`. [B]
    """
    layers = layers_per_stage(model.num_layers, pp)
    per_layer = activation_bytes_per_layer(
        model, tokens, tp, sequence_parallel, recompute, bytes_per_value, flash_attention, dropout
    )
    return layers * per_layer
