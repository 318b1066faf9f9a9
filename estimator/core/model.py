"""Model arithmetic: parameter counts and FLOPs per token of a decoder-only transformer.

Conventions (see docs/methodology.md):

* Parameters count the weight matrices and embeddings only; biases, norm gains and
  position tables are left out (they are < 0.1 % of any model of interest). GPT-3 175B
  (96 layers, h = 12288, V = 51200, tied embeddings) gives 174.6 B, as Brown et al. 2020.
* Model FLOPs follow the convention of Kaplan et al. 2020, PaLM (Chowdhery et al. 2022,
  App. B) and Megatron (Narayanan et al. 2021, eq. 3): 2 FLOPs per multiply-accumulate,
  backward = 2 x forward, the LM-head matmul included, and the attention score/value matmuls
  counted *without* causal halving (12 l h s per token for forward + backward).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from estimator.core._types import FloatArray, Numeric
from estimator.core.constants import (
    ATTENTION_SCORE_TRAINING_FLOPS,
    FORWARD_BACKWARD_PASSES,
    FORWARD_FLOPS_PER_PARAMETER,
    GATED_MLP_MATRICES,
    MLP_MATRICES,
    TRAINING_FLOPS_PER_PARAMETER,
)
from estimator.core.scenario import ModelConfig


@lru_cache(maxsize=256)
def attention_parameters(model: ModelConfig) -> int:
    """Weights of one attention block: Q and output projections plus K and V for GQA/MQA,
    or multi-head latent attention's down- and up-projections.

    Parameters
    ----------
    model : ModelConfig
        Transformer shape: h (``hidden_size``), n_heads, n_kv (``num_kv_heads``), d_head,
        and ``mla``.

    Returns
    -------
    int
        2 h (n_heads d_head) + 2 h (n_kv d_head); 2 h^2 + 2 h (n_kv d_head) when
        d_head = h / n_heads. With MLA (DeepSeek-AI 2024, arXiv:2405.04434, section 2.1):
        h r_q + r_q n (d_nope + d_rope) (or h n (d_nope + d_rope) without a query latent)
        + h (r_kv + d_rope) + r_kv n (d_nope + d_v) + n d_v h: 149.2 M per layer for
        DeepSeek-V2 (8.95 B over its 60 layers). [parameters]
    """
    h, mla = model.hidden_size, model.mla
    if mla is None:
        return h * (model.attention_width + model.key_width + model.value_width) + (
            model.output_width * h
        )
    heads = model.num_attention_heads
    if mla.q_lora_rank:
        query = h * mla.q_lora_rank + mla.q_lora_rank * model.attention_width
    else:
        query = h * model.attention_width
    # The shared latent and rotary key, then each head's no-rope key and value from it.
    key_value = h * (mla.kv_lora_rank + mla.qk_rope_head_dim) + mla.kv_lora_rank * heads * (
        mla.qk_nope_head_dim + mla.v_head_dim
    )
    return query + key_value + model.output_width * h


def kv_width_per_device(model: ModelConfig, tp: Numeric) -> FloatArray:
    """Key plus value width one tensor-parallel rank holds per token.

    Parameters
    ----------
    model : ModelConfig
        Transformer shape: n_kv, d_head and the value head (MLA's d_v).
    tp : array_like
        Tensor-parallel size t; KV heads are replicated once t exceeds them. [devices]

    Returns
    -------
    ndarray
        max(n_kv / t, 1) (d_head + d_v). [elements]
    """
    heads = np.maximum(model.num_kv_heads / np.asarray(tp, dtype=np.float64), 1.0)
    return heads * (model.head_dim + model.value_head_dim)


def mlp_parameters(hidden_size: int, ffn_hidden_size: int, gated: bool) -> int:
    """Weights of one MLP: up and down projections, plus the gate of a gated MLP.

    Parameters
    ----------
    hidden_size : int
        Model width h. [elements]
    ffn_hidden_size : int
        MLP width f. [elements]
    gated : bool
        Whether the MLP is gated (SwiGLU-style, three matrices).

    Returns
    -------
    int
        2 h f, or 3 h f gated. [parameters]

    References
    ----------
    Shazeer 2020, "GLU Variants Improve Transformer", arXiv:2002.05202, section 2.
    """
    return (GATED_MLP_MATRICES if gated else MLP_MATRICES) * hidden_size * ffn_hidden_size


def num_moe_layers(model: ModelConfig) -> int:
    """Layers whose MLP is a mixture of experts (every ``moe_layer_every``-th layer).

    Parameters
    ----------
    model : ModelConfig
        Transformer shape; ``model.moe`` None for a dense model.

    Returns
    -------
    int
        floor((l - first_dense_layers) / moe_layer_every), 0 for a dense model. [layers]
    """
    if model.moe is None:
        return 0
    return (model.num_layers - model.moe.first_dense_layers) // model.moe.moe_layer_every


def dense_mlp_parameters(model: ModelConfig) -> int:
    """Weights of one dense (non-MoE) MLP (:func:`mlp_parameters` at h and f).

    Parameters
    ----------
    model : ModelConfig
        Transformer shape.

    Returns
    -------
    int
        2 h f, or 3 h f gated. [parameters]
    """
    return mlp_parameters(model.hidden_size, model.ffn_hidden_size, model.gated_mlp)


def expert_parameters(model: ModelConfig) -> int:
    """Weights of one routed expert (:func:`mlp_parameters` at the expert width f_e).

    Parameters
    ----------
    model : ModelConfig
        Transformer shape.

    Returns
    -------
    int
        2 h f_e, or 3 h f_e gated; 0 for a dense model. [parameters]
    """
    if model.moe is None:
        return 0
    return mlp_parameters(model.hidden_size, model.moe.expert_ffn_hidden_size, model.gated_mlp)


def moe_mlp_parameters(model: ModelConfig, active: bool) -> int:
    """Weights of one MoE MLP: router, shared experts, and all (or top-k) routed experts.

    Parameters
    ----------
    model : ModelConfig
        Transformer shape.
    active : bool
        Count only the top-k routed experts a token passes through.

    Returns
    -------
    int
        h E + (E or k + shared) expert weights; 0 for a dense model. [parameters]
    """
    if model.moe is None:
        return 0
    routed = model.moe.top_k if active else model.moe.num_experts
    router = model.hidden_size * model.moe.num_experts
    return router + (routed + model.moe.num_shared_experts) * expert_parameters(model)


def embedding_parameters(model: ModelConfig) -> int:
    """Input embedding plus, unless tied, the output (LM head) matrix.

    Parameters
    ----------
    model : ModelConfig
        Transformer shape.

    Returns
    -------
    int
        V h tied, 2 V h untied. [parameters]
    """
    return (1 if model.tied_embeddings else 2) * model.vocab_size * model.hidden_size


@lru_cache(maxsize=256)
def layer_parameters(model: ModelConfig, active: bool = False) -> int:
    """Weights of all transformer layers (attention + MLP), without embeddings.

    Parameters
    ----------
    model : ModelConfig
        Transformer shape.
    active : bool
        Count only the top-k routed experts of MoE layers.

    Returns
    -------
    int
        l attention blocks + dense and MoE MLPs. [parameters]
    """
    n_moe = num_moe_layers(model)
    mlp = (model.num_layers - n_moe) * dense_mlp_parameters(model)
    mlp += n_moe * moe_mlp_parameters(model, active)
    return model.num_layers * attention_parameters(model) + mlp


@lru_cache(maxsize=256)
def total_parameters(model: ModelConfig) -> int:
    """All parameters of the model, Psi.

    Parameters
    ----------
    model : ModelConfig
        Transformer shape.

    Returns
    -------
    int
        Layers plus embeddings (174.6 B for GPT-3 175B, Brown et al. 2020). [parameters]
    """
    return layer_parameters(model) + embedding_parameters(model)


@lru_cache(maxsize=256)
def active_parameters(model: ModelConfig) -> int:
    """Parameters one token passes through (top-k experts only for MoE).

    Parameters
    ----------
    model : ModelConfig
        Transformer shape.

    Returns
    -------
    int
        Active layer weights plus embeddings. [parameters]
    """
    return layer_parameters(model, active=True) + embedding_parameters(model)


@lru_cache(maxsize=256)
def matmul_parameters_per_token(model: ModelConfig) -> int:
    """Weights used in a matmul per token, N_matmul: active layers plus the LM head (V h).

    The input embedding is a table lookup, so it does no matmul FLOPs.

    Parameters
    ----------
    model : ModelConfig
        Transformer shape.

    Returns
    -------
    int
        [parameters]
    """
    return layer_parameters(model, active=True) + model.vocab_size * model.hidden_size


def attention_flops_per_token(model: ModelConfig) -> float:
    """Attention score and value matmuls, forward + backward, non-causal convention.

    Parameters
    ----------
    model : ModelConfig
        Transformer shape: l, n_heads d_head and s.

    Returns
    -------
    float
        12 l (n_heads d_head) s: forward QK^T and AV are 2 s n_heads d_head FLOPs each per
        token and layer, backward twice that. With MLA the query/key and value heads differ
        (d_qk = d_nope + d_rope, d_v): 6 l n_heads (d_qk + d_v) s
        (:attr:`ModelConfig.score_width`). [FLOP/token]

    References
    ----------
    Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters
    Using Megatron-LM", SC21, eq. 3 (the s/6h term, where n_heads d_head = h).
    """
    return ATTENTION_SCORE_TRAINING_FLOPS * model.num_layers * model.score_width * model.seq_len


@lru_cache(maxsize=256)
def model_flops_per_token(model: ModelConfig) -> float:
    """Model FLOPs per trained token, forward + backward, without recomputation.

    Parameters
    ----------
    model : ModelConfig
        Transformer shape.

    Returns
    -------
    float
        6 N_matmul + 12 l h s. For GPT models this equals 72 l h^2 (1 + s/6h + V/12lh),
        Narayanan et al. 2021 eq. 3 without the recompute pass. [FLOP/token]

    References
    ----------
    Kaplan et al. 2020, "Scaling Laws for Neural Language Models", arXiv:2001.08361,
    eq. 2.2; Chowdhery et al. 2022, "PaLM", appendix B; Narayanan et al. 2021, eq. 3.
    """
    matmuls = TRAINING_FLOPS_PER_PARAMETER * matmul_parameters_per_token(model)
    return matmuls + attention_flops_per_token(model)


@lru_cache(maxsize=256)
def recompute_flops_per_token(model: ModelConfig, recompute: str) -> float:
    """Extra forward FLOPs spent on activation recomputation.

    Parameters
    ----------
    model : ModelConfig
        Transformer shape.
    recompute : {'none', 'selective', 'full'}
        'full' re-runs every layer's forward (2 N_layers + 4 l h s); 'selective' re-runs
        only the attention core QK^T, softmax, AV (4 l h s). The LM head is not recomputed.

    Returns
    -------
    float
        [FLOP/token]

    References
    ----------
    Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
    Models", arXiv:2205.05198, section 5.
    """
    attention_forward = attention_flops_per_token(model) / FORWARD_BACKWARD_PASSES
    if recompute == "full":
        layers = FORWARD_FLOPS_PER_PARAMETER * layer_parameters(model, active=True)
        return layers + attention_forward
    if recompute == "selective":
        return attention_forward
    return 0.0


@lru_cache(maxsize=256)
def hardware_flops_per_token(model: ModelConfig, recompute: str) -> float:
    """Model FLOPs plus recomputation: what the hardware executes (HFU numerator).

    Parameters
    ----------
    model : ModelConfig
        Transformer shape.
    recompute : {'none', 'selective', 'full'}
        Activation recomputation mode (:func:`recompute_flops_per_token`).

    Returns
    -------
    float
        With full recompute, 96 B s l h^2 (1 + s/6h + V/16lh) per iteration over B s
        tokens for GPT models. [FLOP/token]

    References
    ----------
    Narayanan et al. 2021, eq. 3; Korthikanti et al. 2022, section 5.
    """
    return model_flops_per_token(model) + recompute_flops_per_token(model, recompute)
