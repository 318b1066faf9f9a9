"""Model arithmetic against published parameter counts and FLOP formulas."""

from __future__ import annotations

import dataclasses

from numpy.testing import assert_allclose

from estimator.core import model as arithmetic
from estimator.core.scenario import MLAConfig, ModelConfig, MoEConfig

from .scenarios import GPT3_175B_MODEL


def config(**fields: object) -> ModelConfig:
    """A ModelConfig with the contract's defaults filled in."""
    data: dict = {"name": "m", "gated_mlp": False, "tied_embeddings": False, "moe": None}
    data.update(fields)
    data.setdefault("num_kv_heads", data["num_attention_heads"])
    data.setdefault("ffn_hidden_size", 4 * data["hidden_size"])
    return ModelConfig(**data)


GPT3 = config(**GPT3_175B_MODEL)


def test_total_parameters_gpt3_175b() -> None:
    # Brown et al. 2020, table 2.1: "175.0B"; 12 l h^2 + V h = 174.6 B with tied embeddings.
    assert_allclose(arithmetic.total_parameters(GPT3), 174.6e9, rtol=1e-3)


def test_total_parameters_llama2_70b_gqa_gated() -> None:
    # Touvron et al. 2023 (Llama 2): 68,976,648,192 parameters incl. 1.3 M norm gains.
    llama = config(
        num_layers=80,
        hidden_size=8192,
        num_attention_heads=64,
        num_kv_heads=8,
        ffn_hidden_size=28672,
        gated_mlp=True,
        vocab_size=32000,
        seq_len=4096,
    )
    assert_allclose(arithmetic.total_parameters(llama), 68_976_648_192, rtol=1e-4)


def test_total_and_active_parameters_mixtral_8x7b() -> None:
    # Jiang et al. 2024 (Mixtral of Experts): 47 B total ("46.7B"), 13 B active ("12.9B").
    mixtral = config(
        num_layers=32,
        hidden_size=4096,
        num_attention_heads=32,
        num_kv_heads=8,
        ffn_hidden_size=14336,
        gated_mlp=True,
        vocab_size=32000,
        seq_len=4096,
        moe=MoEConfig(num_experts=8, top_k=2, expert_ffn_hidden_size=14336),
    )
    assert_allclose(arithmetic.total_parameters(mixtral), 46.7e9, rtol=5e-3)
    assert_allclose(arithmetic.active_parameters(mixtral), 12.9e9, rtol=1e-2)


def test_total_parameters_moe_shared_experts_and_layer_interval() -> None:
    h, f, n_layers, v = 1024, 512, 12, 1000
    moe = MoEConfig(
        num_experts=16, top_k=2, expert_ffn_hidden_size=f, num_shared_experts=1, moe_layer_every=3
    )
    m = config(
        num_layers=n_layers,
        hidden_size=h,
        num_attention_heads=8,
        vocab_size=v,
        seq_len=128,
        moe=moe,
    )
    attention, dense, expert = 4 * h * h, 2 * h * 4 * h, 2 * h * f
    moe_layer = h * 16 + (16 + 1) * expert
    expected = n_layers * attention + 8 * dense + 4 * moe_layer + 2 * v * h
    assert arithmetic.total_parameters(m) == expected
    active = n_layers * attention + 8 * dense + 4 * (h * 16 + 3 * expert) + 2 * v * h
    assert arithmetic.active_parameters(m) == active


def test_model_flops_per_token_narayanan_eq3_without_recompute() -> None:
    # Narayanan et al. 2021 eq. 3 without the recompute pass: 72 B s l h^2 (1 + s/6h + V/12lh).
    b, s, n_layers, h, v = 1536, 2048, 96, 12288, 51200
    per_iteration = 72 * b * s * n_layers * h**2 * (1 + s / (6 * h) + v / (12 * n_layers * h))
    assert_allclose(arithmetic.model_flops_per_token(GPT3) * b * s, per_iteration, rtol=1e-12)


def test_hardware_flops_per_token_narayanan_eq3_full_recompute() -> None:
    # Narayanan et al. 2021 eq. 3: 96 B s l h^2 (1 + s/6h + V/16lh) FLOPs per iteration.
    b, s, n_layers, h, v = 1536, 2048, 96, 12288, 51200
    per_iteration = 96 * b * s * n_layers * h**2 * (1 + s / (6 * h) + v / (16 * n_layers * h))
    flops = arithmetic.hardware_flops_per_token(GPT3, "full") * b * s
    assert_allclose(flops, per_iteration, rtol=1e-12)


def test_model_flops_per_token_megatron_formula_gqa_untied() -> None:
    # Megatron-LM num_floating_point_operations (dense, non-gated, GQA), per token:
    # 12 n_layers h^2 ((1 + kv/heads + s/h) + f/h + V/(2 n_layers h)).
    n_layers, h, a, kv, f, v, s = 32, 4096, 32, 8, 11008, 32000, 4096
    m = config(
        num_layers=n_layers,
        hidden_size=h,
        num_attention_heads=a,
        num_kv_heads=kv,
        ffn_hidden_size=f,
        vocab_size=v,
        seq_len=s,
    )
    expected = 12 * n_layers * h * h * ((1 + kv / a + s / h) + f / h + v / (2 * n_layers * h))
    assert_allclose(arithmetic.model_flops_per_token(m), expected, rtol=1e-12)


def test_recompute_flops_per_token_ordering() -> None:
    none, selective, full = (
        arithmetic.recompute_flops_per_token(GPT3, r) for r in ("none", "selective", "full")
    )
    assert none == 0.0 < selective < full
    # selective recompute re-runs the attention core forward only: 4 l h s per token
    assert_allclose(selective, 4 * 96 * 12288 * 2048, rtol=1e-12)


# --- multi-head latent attention (DeepSeek-AI 2024, arXiv:2405.04434, section 2.1) -------

#: DeepSeek-V2 (HF config.json of deepseek-ai/DeepSeek-V2): 60 layers, h 5120, 128 heads, query
#: rank 1536, KV rank 512, 128 + 64 query/key dims per head, 128 value dims; the first layer
#: dense (SwiGLU 12288), the rest 2 shared + 160 routed experts of 1536, top-6.
DEEPSEEK_V2_MLA = MLAConfig(
    kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, q_lora_rank=1536
)
DEEPSEEK_V2 = config(
    num_layers=60,
    hidden_size=5120,
    num_attention_heads=128,
    ffn_hidden_size=12288,
    gated_mlp=True,
    vocab_size=102400,
    seq_len=4096,
    moe=MoEConfig(num_experts=160, top_k=6, expert_ffn_hidden_size=1536, num_shared_experts=2,
                  first_dense_layers=1),
    mla=DEEPSEEK_V2_MLA,
)  # fmt: skip


def test_mla_attention_parameters_closed_form() -> None:
    h, n, r_q, r_kv, nope, rope, v = 5120, 128, 1536, 512, 128, 64, 128
    query = h * r_q + r_q * n * (nope + rope)
    key_value = h * (r_kv + rope) + r_kv * n * (nope + v)
    assert arithmetic.attention_parameters(DEEPSEEK_V2) == query + key_value + n * v * h
    assert arithmetic.attention_parameters(DEEPSEEK_V2) == 149_225_472
    # Without a query latent (DeepSeek-V2-Lite) the query is one full-rank projection.
    lite = dataclasses.replace(DEEPSEEK_V2, mla=dataclasses.replace(DEEPSEEK_V2_MLA, q_lora_rank=0))
    assert arithmetic.attention_parameters(lite) == h * n * (nope + rope) + key_value + n * v * h


def test_mla_model_matches_deepseek_v2_published_sizes() -> None:
    # arXiv:2405.04434: 236B total, 21B activated per token (without the input embedding,
    # 0.52B, which the estimator counts): 1 % on the total, 3 % on the active count.
    assert arithmetic.num_moe_layers(DEEPSEEK_V2) == 59
    assert_allclose(arithmetic.total_parameters(DEEPSEEK_V2), 236e9, rtol=0.01)
    embedding = 102400 * 5120
    assert_allclose(arithmetic.active_parameters(DEEPSEEK_V2) - embedding, 21e9, rtol=0.03)


def test_mla_attention_flops_use_the_query_and_value_widths() -> None:
    # Score matmul over 192-wide query/key heads, value matmul over 128-wide value heads:
    # 2 s n (d_qk + d_v) forward per token and layer, three times that trained.
    layers, s, n = 60, 4096, 128
    expected = 3 * 2 * layers * s * n * (192 + 128)
    assert_allclose(arithmetic.attention_flops_per_token(DEEPSEEK_V2), expected, rtol=1e-12)
    # Standard attention keeps the 12 l h s of Narayanan et al. 2021, eq. 3.
    assert_allclose(arithmetic.attention_flops_per_token(GPT3), 12 * 96 * 12288 * 2048)
