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

from estimator.core.scenario import ModelConfig


def attention_parameters(model: ModelConfig) -> int:
    """Weights of one attention block: Q and output projections plus K and V for GQA/MQA.

    Returns
    -------
    int
        2 h (n_heads d_head) + 2 h (n_kv d_head); 2 h^2 + 2 h (n_kv d_head) when
        d_head = h / n_heads. [parameters]
    """
    kv_width = model.num_kv_heads * model.head_dim
    return 2 * model.hidden_size * model.attention_width + 2 * model.hidden_size * kv_width


def mlp_parameters(hidden_size: int, ffn_hidden_size: int, gated: bool) -> int:
    """Weights of one MLP: 2 h f, or 3 h f for gated (SwiGLU-style) MLPs (Shazeer 2020)."""
    return (3 if gated else 2) * hidden_size * ffn_hidden_size


def num_moe_layers(model: ModelConfig) -> int:
    """Layers whose MLP is a mixture of experts (every ``moe_layer_every``-th layer)."""
    return 0 if model.moe is None else model.num_layers // model.moe.moe_layer_every


def dense_mlp_parameters(model: ModelConfig) -> int:
    """Weights of one dense (non-MoE) MLP. [parameters]"""
    return mlp_parameters(model.hidden_size, model.ffn_hidden_size, model.gated_mlp)


def expert_parameters(model: ModelConfig) -> int:
    """Weights of one routed expert. [parameters]"""
    if model.moe is None:
        return 0
    return mlp_parameters(model.hidden_size, model.moe.expert_ffn_hidden_size, model.gated_mlp)


def moe_mlp_parameters(model: ModelConfig, active: bool) -> int:
    """Weights of one MoE MLP: router, shared experts, and all (or top-k) routed experts."""
    if model.moe is None:
        return 0
    routed = model.moe.top_k if active else model.moe.num_experts
    router = model.hidden_size * model.moe.num_experts
    return router + (routed + model.moe.num_shared_experts) * expert_parameters(model)


def embedding_parameters(model: ModelConfig) -> int:
    """Input embedding plus, unless tied, the output (LM head) matrix: V h or 2 V h."""
    return (1 if model.tied_embeddings else 2) * model.vocab_size * model.hidden_size


def layer_parameters(model: ModelConfig, active: bool = False) -> int:
    """Weights of all transformer layers (attention + MLP), without embeddings."""
    n_moe = num_moe_layers(model)
    mlp = (model.num_layers - n_moe) * dense_mlp_parameters(model)
    mlp += n_moe * moe_mlp_parameters(model, active)
    return model.num_layers * attention_parameters(model) + mlp


def total_parameters(model: ModelConfig) -> int:
    """All parameters of the model. [parameters]"""
    return layer_parameters(model) + embedding_parameters(model)


def active_parameters(model: ModelConfig) -> int:
    """Parameters one token passes through (top-k experts only for MoE). [parameters]"""
    return layer_parameters(model, active=True) + embedding_parameters(model)


def matmul_parameters_per_token(model: ModelConfig) -> int:
    """Weights used in a matmul per token: active layers plus the LM head (V h).

    The input embedding is a table lookup, so it does no matmul FLOPs.
    """
    return layer_parameters(model, active=True) + model.vocab_size * model.hidden_size


def attention_flops_per_token(model: ModelConfig) -> float:
    """Attention score and value matmuls, forward + backward, non-causal convention.

    Returns
    -------
    float
        12 l (n_heads d_head) s: forward QK^T and AV are 2 s n_heads d_head FLOPs each per
        token and layer, backward twice that (Narayanan et al. 2021, eq. 3, the s/6h term,
        where n_heads d_head = h). [FLOP/token]
    """
    return 12.0 * model.num_layers * model.attention_width * model.seq_len


def model_flops_per_token(model: ModelConfig) -> float:
    """Model FLOPs per trained token, forward + backward, without recomputation.

    Returns
    -------
    float
        6 N_matmul + 12 l h s (Kaplan et al. 2020 eq. 2.2; PaLM App. B). For GPT models this
        equals 72 l h^2 (1 + s/6h + V/12lh), Narayanan et al. 2021 eq. 3 without the
        recompute pass. [FLOP/token]
    """
    return 6.0 * matmul_parameters_per_token(model) + attention_flops_per_token(model)


def recompute_flops_per_token(model: ModelConfig, recompute: str) -> float:
    """Extra forward FLOPs spent on activation recomputation (Korthikanti et al. 2022).

    Parameters
    ----------
    recompute : {'none', 'selective', 'full'}
        'full' re-runs every layer's forward (2 N_layers + 4 l h s); 'selective' re-runs
        only the attention core QK^T, softmax, AV (4 l h s). The LM head is not recomputed.

    Returns
    -------
    float
        [FLOP/token]
    """
    attention_forward = attention_flops_per_token(model) / 3.0
    if recompute == "full":
        return 2.0 * layer_parameters(model, active=True) + attention_forward
    if recompute == "selective":
        return attention_forward
    return 0.0


def hardware_flops_per_token(model: ModelConfig, recompute: str) -> float:
    """Model FLOPs plus recomputation: what the hardware executes (HFU numerator).

    With full recompute this is 96 B s l h^2 (1 + s/6h + V/16lh) per iteration over B s
    tokens for GPT models, Narayanan et al. 2021 eq. 3. [FLOP/token]
    """
    return model_flops_per_token(model) + recompute_flops_per_token(model, recompute)
