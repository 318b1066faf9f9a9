"""Memory per device: weights, gradients, optimizer state and the allowance beyond tensors.

Activations are :mod:`estimator.core.activations`; which layers a pipeline stage holds is
:mod:`estimator.core.pipeline`. Every function takes the layout parameters as numpy arrays
(or scalars) that broadcast against each other, so the same code serves ``estimate`` (one
layout) and a layout search. Sizes are in bytes.

References
----------
Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion Parameter
Models", SC20, section 3 and figure 1 (2+2+12 bytes per parameter, stages 1-3).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import numpy as np

from estimator.core import finetune
from estimator.core import model as arithmetic
from estimator.core._types import FloatArray, Numeric
from estimator.core.constants import GIB
from estimator.core.pipeline import layers_per_stage, stage_index, stage_layers
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
    per_layer, routed = _layer_parameters(model)
    return per_layer / tp, routed / (tp * ep)


@lru_cache(maxsize=256)
def _layer_parameters(model: ModelConfig) -> tuple[float, float]:
    """(dense, routed-expert) parameters of the average layer, before any split: a model's
    constant, asked for by every stage of every layout evaluation."""
    moe_share = arithmetic.num_moe_layers(model) / model.num_layers
    routed = 0 if model.moe is None else model.moe.num_experts * arithmetic.expert_parameters(model)
    moe_dense = arithmetic.moe_mlp_parameters(model, active=False) - routed
    per_layer = (
        arithmetic.attention_parameters(model)
        + (1 - moe_share) * arithmetic.dense_mlp_parameters(model)
        + moe_share * moe_dense
    )
    return per_layer, moe_share * routed


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
        One of :data:`~estimator.core.pipeline.STAGES`, or ``"busiest"``: ceil(l / p) layers
        plus one embedding matrix, an upper bound used for the data-parallel traffic of the
        slowest stage.

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
        One of :data:`~estimator.core.pipeline.STAGES`, or ``"busiest"`` (:func:`stage_parameters`).
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
    (states,) = stage_model_state_bytes(
        model, precision, tp, pp, dp_cp, ep, zero_stage, offload, (stage,), method,
        optimizer, master_weights,
    )  # fmt: skip
    return states


def stage_model_state_bytes(
    model: ModelConfig,
    precision: str,
    tp: Numeric,
    pp: Numeric,
    dp_cp: Numeric,
    ep: Numeric,
    zero_stage: Numeric,
    offload: str,
    stages: tuple[str, ...],
    method: MethodConfig = finetune.FULL,
    optimizer: str = "adamw",
    master_weights: bool = True,
) -> list[tuple[FloatArray, FloatArray, FloatArray]]:
    """:func:`model_state_bytes` of each of ``stages``, one per stage: what does not
    depend on the stage (bytes per parameter, the prefetched layers) worked out once."""
    zero_stage = np.asarray(zero_stage)
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
    code = OFFLOAD_CODES[offload]
    states = []
    for stage in stages:
        dense, expert = stage_parameters(model, tp, pp, ep, stage)
        full_weights = base_bytes * (dense + expert)
        weights = np.minimum(
            full_weights,
            base_bytes * shard(3, dense, expert) + np.where(zero_stage >= 3, prefetch, 0.0),
        )
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
        states.append((weights, gradients, optimizer_state))
    return states


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
        One of :data:`~estimator.core.pipeline.STAGES`, or ``"busiest"``: ceil(l / p).

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


#: The one memory verdict of an estimate: it fits with the framework's headroom to spare;
#: it fits the device but eats into that headroom (tight); or it does not fit the device.
FITS, TIGHT, DOES_NOT_FIT = "fits", "tight", "does_not_fit"
MEMORY_VERDICTS = (FITS, TIGHT, DOES_NOT_FIT)


def memory_verdict(needed_gib: float, usable_gib: float, capacity_gib: float) -> str:
    """Whether a layout's memory fits: ``"fits"``, ``"tight"`` or ``"does_not_fit"``.

    A layout that needs more than the device holds does not fit (``fits_in_memory`` is
    false). One within the device but over the usable memory - the device's less the
    framework profile's headroom for allocator fragmentation and peak transients, the bound
    the layout search keeps to - is tight: it may run out of memory at a peak. One within
    the usable memory fits.

    Parameters
    ----------
    needed_gib : float
        Memory the layout needs per device. [GiB]
    usable_gib : float
        Memory the framework lets a layout use per device. [GiB]
    capacity_gib : float
        The device's memory. [GiB]

    Returns
    -------
    str
        One of :data:`MEMORY_VERDICTS`.
    """
    if needed_gib > capacity_gib:
        return DOES_NOT_FIT
    if needed_gib > usable_gib:
        return TIGHT
    return FITS


def result_memory_verdict(result: Mapping[str, Any]) -> str:
    """The memory verdict of an ``estimate`` output, also of one stored before the output
    carried ``memory_verdict`` (read from its headroom and ``fits_in_memory``)."""
    verdict = result.get("memory_verdict")
    if verdict in MEMORY_VERDICTS:
        return str(verdict)
    if not result.get("fits_in_memory", True):
        return DOES_NOT_FIT
    headroom = result.get("memory_headroom")
    if headroom and float(headroom["headroom_gib"]) < 0:
        return TIGHT
    return FITS
