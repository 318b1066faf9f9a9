"""Memory per device: weights, gradients, optimizer state, activations, allowance.

Every function takes the layout parameters as numpy arrays (or scalars) that broadcast
against each other, so the same code serves ``estimate`` (one layout) and a layout search.
Sizes are in bytes.

References
----------
Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion Parameter
Models", SC20, section 3 and figure 1 (2+2+12 bytes per parameter, stages 1-3).
Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
arXiv:2205.05198, section 4 and table 2 (activations per layer).
"""

from __future__ import annotations

import numpy as np

from estimator.core import finetune
from estimator.core import model as arithmetic
from estimator.core._types import FloatArray, Numeric
from estimator.core.constants import DROPOUT_MASK_BYTES, GIB
from estimator.core.scenario import MethodConfig, ModelConfig

#: CUDA context, cuBLAS/cuDNN workspaces and NCCL buffers, per GPU (the default of
#: :class:`~estimator.core.calibration.Efficiency`; TPUs hold less). [B]
FIXED_ALLOWANCE_BYTES = 2.0 * GIB
#: Caching-allocator fragmentation, as a fraction of the tensors it holds (GPU default). [1]
FRAGMENTATION = 0.05
#: Offload modes as integer codes: what ``training.offload`` keeps in host memory.
OFFLOAD_CODES = {"none": 0, "optimizer": 1, "optimizer_and_params": 2}
#: Recompute modes as integer codes (array-friendly).
RECOMPUTE_CODES = {"none": 0, "selective": 1, "full": 2}
NO_RECOMPUTE, SELECTIVE_RECOMPUTE, FULL_RECOMPUTE = (
    RECOMPUTE_CODES["none"],
    RECOMPUTE_CODES["selective"],
    RECOMPUTE_CODES["full"],
)
#: Unsharded layers ZeRO-3 (and parameter offload) keeps on the device: the one being
#: computed and the one being prefetched (assumption; FSDP's default forward/backward
#: prefetch of the next unit). [layers]
PREFETCH_LAYERS = 2.0
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


def bytes_per_parameter(
    precision: str, optimizer: str = "adamw", adapters: bool = False, master_weights: bool = True
) -> tuple[float, float, float]:
    """Weights, gradients and optimizer state per trained parameter.

    Parameters
    ----------
    precision : {'fp32', 'tf32', 'fp16', 'bf16', 'fp8'}
        Training precision.
    optimizer : str
        One of :data:`finetune.OPTIMIZER_STATE_VALUES`.
    adapters : bool
        LoRA adapters (16-bit, no fp32 master copy).
    master_weights : bool
        Mixed precision with an fp32 master copy and fp32 moments; False: pure 16-bit.

    Returns
    -------
    tuple of float
        With AdamW: (4, 4, 8) for fp32 and tf32 (Adam m and v); (2, 2, 12) for mixed
        precision (16-bit weights and gradients; fp32 master copy, m and v). fp8 training
        keeps 16-bit weights and gradients (the fp8 casts are transient). Other optimizers:
        see :func:`finetune.state_bytes`. [B]

    References
    ----------
    Rajbhandari et al. 2020, "ZeRO", section 3.1.
    """
    return finetune.state_bytes(precision, optimizer, adapters, master_weights)


#: Pipeline stages whose memory is checked: the first (most micro-batches in flight, the
#: embedding), the second (one micro-batch fewer in flight, a full share of layers) and the
#: last (the LM head and its logits).
STAGES = ("first", "second", "last")


def layers_per_stage(num_layers: int, pp: Numeric) -> FloatArray:
    """Layers on the most loaded pipeline stage, k = ceil(l / pp).

    Parameters
    ----------
    num_layers : int
        Transformer layers l. [layers]
    pp : array_like
        Pipeline-parallel size p. [stages]

    Returns
    -------
    ndarray
        [layers]
    """
    return np.ceil(num_layers / np.asarray(pp, dtype=np.float64))


def pipeline_split(num_layers: int, pp: Numeric) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Layers on the first, a middle and the last stage of an uneven pipeline split.

    Every stage holds k = ceil(l / p) layers but the two ends: the d = p k - l layers
    missing come off the first stage (ceil(d / 2), it also holds the embedding and the most
    micro-batches in flight) and the last (floor(d / 2), it also holds the LM head and the
    loss), never below one layer each. This is Megatron-LM's
    ``--decoder-first-pipeline-num-layers``/``--decoder-last-pipeline-num-layers`` and its
    ``--account-for-embedding-in-pipeline-split``/``--account-for-loss-in-pipeline-split``
    (d = 2: Llama 3 405B's 126 layers on 16 stages, 7 + 14 x 8 + 7). With p = 1 all three
    are the l layers.

    Parameters
    ----------
    num_layers : int
        Transformer layers l. [layers]
    pp : array_like
        Pipeline-parallel size p. [stages]

    Returns
    -------
    tuple of ndarray
        (first, middle, last) stage layers. [layers]
    """
    k = layers_per_stage(num_layers, pp)
    missing = np.asarray(pp, dtype=np.float64) * k - num_layers
    first = np.maximum(k - np.ceil(missing / 2.0), 1.0)
    last = np.maximum(k - np.floor(missing / 2.0), 1.0)
    return first, k, last


def stage_index(stage: str, pp: Numeric) -> FloatArray:
    """Rank of ``stage`` in the pipeline.

    Parameters
    ----------
    stage : {'first', 'second', 'last'}
        One of :data:`STAGES`.
    pp : array_like
        Pipeline-parallel size p. [stages]

    Returns
    -------
    ndarray
        0, 1 (the last one when p = 2, 0 when p = 1) or p - 1. [1]
    """
    pp = np.asarray(pp, dtype=np.float64)
    if stage == "first":
        return np.zeros_like(pp)
    return np.minimum(1.0, pp - 1.0) if stage == "second" else pp - 1.0


def stage_layers(num_layers: int, pp: Numeric, stage: str) -> FloatArray:
    """Layers held by ``stage`` (see :func:`pipeline_split`).

    Parameters
    ----------
    num_layers : int
        Transformer layers l. [layers]
    pp : array_like
        Pipeline-parallel size p. [stages]
    stage : {'first', 'second', 'last'}
        One of :data:`STAGES`; the second stage is the last one when p = 2.

    Returns
    -------
    ndarray
        [layers]
    """
    first, middle, last = pipeline_split(num_layers, pp)
    pp = np.asarray(pp, dtype=np.float64)
    if stage == "first":
        return first
    if stage == "second":
        return np.where(pp == 2, last, np.where(pp == 1, first, middle))
    return last


def layer_parameters_per_device(
    model: ModelConfig, tp: Numeric, ep: Numeric
) -> tuple[FloatArray, FloatArray]:
    """Parameters of one (average) transformer layer on one device.

    MoE layers are averaged in by their share of layers; attention, dense MLPs, routers and
    shared experts split over tp, routed experts over tp and ep.

    Parameters
    ----------
    model : ModelConfig
        Transformer shape.
    tp, ep : array_like
        Tensor- and expert-parallel sizes. [devices]

    Returns
    -------
    tuple of ndarray
        (dense, expert) per layer per device. [parameters]
    """
    tp, ep = np.asarray(tp, dtype=np.float64), np.asarray(ep, dtype=np.float64)
    moe_share = arithmetic.num_moe_layers(model) / model.num_layers
    routed = 0 if model.moe is None else model.moe.num_experts * arithmetic.expert_parameters(model)
    moe_dense = arithmetic.moe_mlp_parameters(model, active=False) - routed
    per_layer = (
        arithmetic.attention_parameters(model)
        + (1 - moe_share) * arithmetic.dense_mlp_parameters(model)
        + moe_share * moe_dense
    )
    return per_layer / tp, moe_share * routed / (tp * ep)


def stage_parameters(
    model: ModelConfig, tp: Numeric, pp: Numeric, ep: Numeric, stage: str = "busiest"
) -> tuple[FloatArray, FloatArray]:
    """Parameters held by one device of a pipeline stage, before ZeRO sharding.

    The first stage holds the input embedding and the last the LM head (tied embeddings are
    replicated on both, as in Megatron-LM); with pp = 1 one device holds both. Everything is
    split over tp; routed experts also over ep.

    Parameters
    ----------
    model : ModelConfig
        Transformer shape.
    tp, pp, ep : array_like
        Tensor-, pipeline- and expert-parallel sizes. [devices]
    stage : str
        One of :data:`STAGES`, or ``"busiest"``: ceil(l / p) layers plus one embedding
        matrix, an upper bound used for the data-parallel traffic of the slowest stage.

    Returns
    -------
    tuple of ndarray
        (dense, expert): parameters replicated across data parallelism, and routed-expert
        parameters (sharded over ep). [parameters]
    """
    pp = np.asarray(pp, dtype=np.float64)
    if stage == "busiest":
        layers = layers_per_stage(model.num_layers, pp)
        ends = np.ones_like(pp)
    else:
        layers = stage_layers(model.num_layers, pp, stage)
        index = stage_index(stage, pp)
        ends = ((index == 0) | (index == pp - 1)).astype(np.float64)
    dense_layer, expert_layer = layer_parameters_per_device(model, tp, ep)
    embedding = ends * np.where(
        pp == 1, arithmetic.embedding_parameters(model), model.vocab_size * model.hidden_size
    )
    dense = layers * dense_layer + embedding / np.asarray(tp, dtype=np.float64)
    return dense, layers * expert_layer


def sharded(count: Numeric, group: Numeric, active: Numeric) -> FloatArray:
    """``count`` divided by ``group`` where ``active`` (a ZeRO stage condition) holds.

    Parameters
    ----------
    count : array_like
        Parameters (or bytes) before sharding. [parameters]
    group : array_like
        Ranks the state is sharded over. [devices]
    active : array_like of bool
        Where sharding applies.

    Returns
    -------
    ndarray
        The per-device share, in the unit of ``count``. [parameters]
    """
    return np.asarray(count, dtype=np.float64) / np.where(active, group, 1.0)


def model_state_bytes(
    model: ModelConfig,
    precision: str,
    tp: Numeric,
    pp: Numeric,
    dp_cp: Numeric,
    ep: Numeric,
    zero_stage: Numeric,
    offload: str = "none",
    stage: str = "busiest",
    method: MethodConfig = finetune.FULL,
    optimizer: str = "adamw",
    master_weights: bool = True,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Weights, gradients and optimizer state per device of a pipeline ``stage`` (see
    :func:`stage_parameters`) under ZeRO stages 0-3.

    Stage 1 shards the optimizer state, stage 2 also the gradients, stage 3 also the weights
    over the ``dp_cp`` ranks that hold the same parameters ((2 + 2 + 12) Psi / N_d at stage
    3). Routed experts shard over dp_cp / ep ranks. Stage 3 keeps :data:`PREFETCH_LAYERS`
    unsharded layers for prefetching, never more than the unsharded weights.

    Offload: ``optimizer`` keeps the fp32 master weights and optimizer moments in host
    memory (none on the device); ``optimizer_and_params`` also the 16-bit weights, of which
    the device holds only the two layers being used and prefetched (ZeRO-Infinity, FSDP CPU
    offload).

    Training methods (:mod:`finetune`): gradients and optimizer state exist only for the
    trained share of the weights (frozen layers and embeddings spread evenly over the
    stages); under LoRA/QLoRA the base weights are stored at their own precision (NF4 for
    QLoRA, plus one 16-bit dequantised copy of the largest matrix) and only the adapters,
    split like the matrices they adapt, have gradients and optimizer state.

    Parameters
    ----------
    model : ModelConfig
        Transformer shape.
    precision : {'fp32', 'tf32', 'fp16', 'bf16', 'fp8'}
        Training precision (:func:`bytes_per_parameter`).
    tp, pp, ep : array_like
        Tensor-, pipeline- and expert-parallel sizes. [devices]
    dp_cp : array_like
        Data-parallel times context-parallel size d c: the ranks holding the same
        parameters. [devices]
    zero_stage : array_like of int
        ZeRO stage 0-3 (FSDP full shard = 3).
    offload : {'none', 'optimizer', 'optimizer_and_params'}
        What lives in host memory (:data:`OFFLOAD_CODES`).
    stage : str
        One of :data:`STAGES`, or ``"busiest"`` (:func:`stage_parameters`).
    method : MethodConfig
        Training method.
    optimizer : str
        One of :data:`finetune.OPTIMIZER_STATE_VALUES`.
    master_weights : bool
        Whether mixed precision keeps an fp32 master copy.

    Returns
    -------
    tuple of ndarray
        (weights, gradients, optimizer). [B]

    References
    ----------
    Rajbhandari et al. 2020, "ZeRO", section 3 and figure 1; Ren et al. 2021,
    "ZeRO-Offload: Democratizing Billion-Scale Model Training", USENIX ATC 21, section 4.
    """
    zero_stage = np.asarray(zero_stage)
    dense, expert = stage_parameters(model, tp, pp, ep, stage)
    expert_group = np.asarray(dp_cp, dtype=np.float64) / np.asarray(ep, dtype=np.float64)
    weight_bytes, gradient_bytes, optimizer_bytes = bytes_per_parameter(
        precision, optimizer, method.adapters, master_weights
    )

    def shard(from_stage: int, dense: FloatArray, expert: FloatArray) -> FloatArray:
        on = zero_stage >= from_stage
        return sharded(dense, dp_cp, on) + sharded(expert, expert_group, on)

    base_bytes = finetune.base_weight_bytes(model, method, weight_bytes)
    layer_dense, layer_expert = layer_parameters_per_device(model, tp, ep)
    prefetch = PREFETCH_LAYERS * base_bytes * (layer_dense + layer_expert)
    full_weights = base_bytes * (dense + expert)
    weights = np.minimum(
        full_weights,
        base_bytes * shard(3, dense, expert) + np.where(zero_stage >= 3, prefetch, 0.0),
    )
    code = OFFLOAD_CODES[offload]
    if code >= 2:
        weights = np.minimum(full_weights, prefetch)
    if method.adapters:
        # Adapters follow the layers: the stage's share of the model's adapter parameters.
        per_layer = finetune.adapter_parameters(model, method) / model.num_layers
        layers = stage_adapter_layers(model, tp, pp, stage)
        trained = per_layer * layers / np.asarray(tp, dtype=np.float64)
        weights = weights + weight_bytes * shard(3, trained, 0.0 * trained)
        if method.type == "qlora":
            weights = weights + weight_bytes * largest_matrix_per_device(model, tp, ep)
        gradients = gradient_bytes * shard(2, trained, 0.0 * trained)
        optimizer_state = optimizer_bytes * shard(1, trained, 0.0 * trained)
    else:
        share = finetune.trained_share(model, method)
        gradients = gradient_bytes * share * shard(2, dense, expert)
        optimizer_state = optimizer_bytes * share * shard(1, dense, expert)
    if code >= 1:
        optimizer_state = 0.0 * optimizer_state
    return weights, gradients, optimizer_state


def stage_adapter_layers(model: ModelConfig, tp: Numeric, pp: Numeric, stage: str) -> FloatArray:
    """Layers of ``stage`` whose adapters a device holds.

    Parameters
    ----------
    model : ModelConfig
        Transformer shape.
    tp : array_like
        Tensor-parallel size (only broadcast against). [devices]
    pp : array_like
        Pipeline-parallel size. [stages]
    stage : str
        One of :data:`STAGES`, or ``"busiest"``: ceil(l / p).

    Returns
    -------
    ndarray
        [layers]
    """
    if stage == "busiest":
        return layers_per_stage(model.num_layers, pp) + 0.0 * np.asarray(tp, dtype=np.float64)
    return stage_layers(model.num_layers, pp, stage) + 0.0 * np.asarray(tp, dtype=np.float64)


def largest_matrix_per_device(model: ModelConfig, tp: Numeric, ep: Numeric) -> FloatArray:
    """Values of the largest weight matrix one device holds: the buffer QLoRA dequantises a
    matrix into before its matmul.

    Parameters
    ----------
    model : ModelConfig
        Transformer shape.
    tp : array_like
        Tensor-parallel size. [devices]
    ep : array_like
        Expert-parallel size (only broadcast against). [devices]

    Returns
    -------
    ndarray
        max(f, n_heads d_head) h / t. [values]
    """
    widest = max(model.ffn_hidden_size, model.attention_width, model.output_width)
    widest *= model.hidden_size
    return widest / np.asarray(tp, dtype=np.float64) + 0.0 * np.asarray(ep, dtype=np.float64)


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
        0 none, 1 selective, 2 full (see ``RECOMPUTE_CODES``).
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
        0 none, 1 selective, 2 full (see ``RECOMPUTE_CODES``).
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
        One of :data:`STAGES`.
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
    pp = np.asarray(pp, dtype=np.float64)
    layers = stage_layers(model.num_layers, pp, stage)
    rank = stage_index(stage, pp)
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
    in_flight = micro_batches_in_flight(pp, num_micro_batches, virtual_stages, rank)
    on_host = np.asarray(offloaded) > 0
    resident = np.minimum(layers, OFFLOAD_RESIDENT_LAYERS)
    held = np.where(on_host, resident, in_flight * layers) * per_layer + working
    logits = np.where(rank == pp - 1, logits_bytes(model, tokens, tp, bytes_per_logit), 0.0)
    return held + logits


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


def allowance_bytes(
    tensor_bytes: Numeric,
    reserved_bytes: float = FIXED_ALLOWANCE_BYTES,
    fragmentation: float = FRAGMENTATION,
) -> FloatArray:
    """Memory outside tensors the model accounts for.

    Parameters
    ----------
    tensor_bytes : array_like
        Weights, gradients, optimizer state and activations on the device. [B]
    reserved_bytes : float
        Fixed reserve: 2 GiB on GPUs (CUDA context, library workspaces, NCCL buffers). [B]
    fragmentation : float
        Allocator fragmentation as a share of the tensors: 5 % with PyTorch's caching
        allocator. [1]

    Returns
    -------
    ndarray
        reserved + fragmentation x tensors. [B]
    """
    return reserved_bytes + fragmentation * np.asarray(tensor_bytes, dtype=np.float64)
