"""Memory per device against Rajbhandari et al. 2020 and Korthikanti et al. 2022."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from numpy.testing import assert_allclose

from estimator.core import activations, memory, pipeline
from estimator.core import model as arithmetic

from .test_model import GPT3, config

S, B, H, A = 2048, 4, 12288, 96  # Korthikanti et al. 2022 notation: s, b, h, a


def per_layer(tp: int, sp: bool, recompute: int, flash: bool = False) -> float:
    return float(
        activations.activation_bytes_per_layer(
            GPT3, S * B, tp, sp, recompute, bytes_per_value=2.0, flash_attention=flash, dropout=True
        )
    )


def test_activation_bytes_per_layer_korthikanti_no_parallelism() -> None:
    # Korthikanti et al. 2022, eq. 1: s b h (34 + 5 a s / h).
    assert_allclose(per_layer(1, False, 0), S * B * H * (34 + 5 * A * S / H), rtol=1e-12)


def test_activation_bytes_per_layer_korthikanti_tensor_parallel() -> None:
    # Table 2, "tensor parallel (baseline)": s b h (10 + 24/t + 5 a s / (h t)).
    t = 8
    expected = S * B * H * (10 + 24 / t + 5 * A * S / (H * t))
    assert_allclose(per_layer(t, False, 0), expected, rtol=1e-12)


def test_activation_bytes_per_layer_korthikanti_sequence_parallel() -> None:
    # Table 2, "tensor + sequence parallel": s b h / t (34 + 5 a s / h).
    t = 8
    expected = S * B * H / t * (34 + 5 * A * S / H)
    assert_allclose(per_layer(t, True, 0), expected, rtol=1e-12)


def test_activation_bytes_per_layer_korthikanti_selective_recompute() -> None:
    # Table 2: s b h 34 / t with sequence parallelism; s b h (10 + 24/t) without.
    t = 8
    assert_allclose(per_layer(t, True, 1), S * B * H * 34 / t, rtol=1e-12)
    assert_allclose(per_layer(t, False, 1), S * B * H * (10 + 24 / t), rtol=1e-12)


def test_activation_bytes_per_layer_korthikanti_full_recompute() -> None:
    # Table 2, "full activation recomputation": 2 s b h (2 s b h / t with sequence parallel).
    assert_allclose(per_layer(1, False, 2), 2 * S * B * H, rtol=1e-12)
    assert_allclose(per_layer(8, True, 2), 2 * S * B * H / 8, rtol=1e-12)


def test_activation_bytes_per_layer_flash_attention_drops_scores() -> None:
    assert_allclose(per_layer(8, True, 0, flash=True), per_layer(8, True, 1), rtol=1e-12)


def zero_states(stage: int, dp: int) -> tuple[float, float, float]:
    model = config(
        num_layers=4, hidden_size=1024, num_attention_heads=8, vocab_size=1000, seq_len=128
    )
    parts = memory.model_state_bytes(model, "bf16", 1, 1, dp, 1, stage)
    return tuple(float(p) for p in parts)  # type: ignore[return-value]


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_model_state_bytes_zero_stages(stage: int) -> None:
    # Rajbhandari et al. 2020, figure 1: (2 + 2 + K) Psi with K = 12, sharded over N_d by
    # stage: 1 the optimizer state, 2 also gradients, 3 also the weights.
    model = config(
        num_layers=4, hidden_size=1024, num_attention_heads=8, vocab_size=1000, seq_len=128
    )
    psi, nd = arithmetic.total_parameters(model), 64
    weights, gradients, optimizer = zero_states(stage, nd)
    assert_allclose(optimizer, 12 * psi / (nd if stage >= 1 else 1), rtol=1e-12)
    assert_allclose(gradients, 2 * psi / (nd if stage >= 2 else 1), rtol=1e-12)
    # stage 3 keeps two unsharded layers for prefetching
    prefetch = (
        2 * 2 * (arithmetic.attention_parameters(model) + arithmetic.dense_mlp_parameters(model))
    )
    expected_weights = 2 * psi / nd + prefetch if stage == 3 else 2 * psi
    assert_allclose(weights, expected_weights, rtol=1e-12)


def test_model_state_bytes_fp32_is_16_bytes_per_parameter() -> None:
    model = config(num_layers=2, hidden_size=512, num_attention_heads=8, vocab_size=100, seq_len=64)
    parts = memory.model_state_bytes(model, "fp32", 1, 1, 1, 1, 0)
    assert_allclose(sum(parts), 16 * arithmetic.total_parameters(model), rtol=1e-12)


def test_micro_batches_in_flight_1f1b_and_interleaved() -> None:
    # Narayanan et al. 2021: 1F1B keeps min(p, m); Korthikanti et al. 2022, section 4.2.3:
    # interleaving keeps p (1 + (p - 1) / (p v)).
    assert_allclose(activations.micro_batches_in_flight(8, 64, 1), 8)
    assert_allclose(activations.micro_batches_in_flight(8, 4, 1), 4)
    assert_allclose(activations.micro_batches_in_flight(8, 64, 4), 8 * (1 + 7 / 32), rtol=1e-12)
    assert_allclose(activations.micro_batches_in_flight(1, 64, 1), 1)


def test_activation_bytes_pipeline_first_stage_holds_all_layers() -> None:
    # With 1F1B and m >= p the first stage holds p micro-batches x l/p layers = l layers.
    tokens = np.array(2048.0)
    one_stage = activations.activation_bytes(GPT3, tokens, 8, 1, True, 1, 1, 1)
    logits = activations.logits_bytes(GPT3, tokens, 8)
    eight = activations.activation_bytes(GPT3, tokens, 8, 8, True, 1, 64, 1)
    assert_allclose(eight, one_stage - logits, rtol=1e-12)


def test_allowance_bytes_fixed_plus_fragmentation() -> None:
    assert_allclose(memory.allowance_bytes(10 * memory.GIB), 2.5 * memory.GIB, rtol=1e-12)


def test_activation_bytes_per_layer_without_dropout_is_32_sbh() -> None:
    # No dropout (modern LLMs): the two 1-byte masks per token go, 34 -> 32 s b h / t.
    t = 8
    stored = activations.activation_bytes_per_layer(GPT3, S * B, t, True, 1)
    assert_allclose(stored, S * B * H * 32 / t, rtol=1e-12)


# Uneven pipeline splits (pipeline.pipeline_split): k = ceil(l / p) layers on the middle
# stages; the d = p k - l missing layers come off the first (ceil(d / 2)) and the last
# (floor(d / 2)) stage.


@pytest.mark.parametrize(
    ("layers", "stages", "expected"),
    [
        (126, 16, (7, 8, 7)),  # Llama 3 405B (Dubey et al. 2024): 7 + 14 x 8 + 7
        (61, 16, (2, 4, 3)),  # k = 4, d = 3: 2 off the first, 1 off the last
        (96, 8, (12, 12, 12)),  # even split (GPT-3 175B)
        (126, 1, (126, 126, 126)),  # no pipeline: one stage holds everything
        (80, 2, (40, 40, 40)),
        (81, 2, (40, 41, 41)),  # k = 41, d = 1: the first stage gives one up
    ],
)
def test_pipeline_split_published_examples(
    layers: int, stages: int, expected: tuple[int, int, int]
) -> None:
    split = pipeline.pipeline_split(layers, stages)
    assert tuple(float(x) for x in split) == expected


def _split_total(layers: int, stages: int) -> float:
    """Layers held by all ``stages`` stages of :func:`pipeline.pipeline_split`."""
    first, middle, last = (float(x) for x in pipeline.pipeline_split(layers, stages))
    if stages == 1:
        return first
    return first + (stages - 2) * middle + last


def test_pipeline_split_sums_to_num_layers_when_at_most_two_are_missing() -> None:
    # The search's divisor candidates (p divides l, l + 1 or l + 2) and every interleaved
    # layout it accepts have d = p k - l <= 2.
    for layers in range(1, 301):
        for stages in range(1, layers + 1):
            k = math.ceil(layers / stages)
            if stages * k - layers > 2:
                continue
            assert _split_total(layers, stages) == layers, (layers, stages)
            first, middle, last = pipeline.pipeline_split(layers, stages)
            assert 1 <= first <= middle
            assert 1 <= last <= middle


def test_pipeline_split_sums_to_num_layers_where_the_ends_absorb_the_deficit() -> None:
    # Any 1 <= p <= l whose d = p k - l missing layers fit on the two ends (d <= 2 (k - 1)):
    # the stages together hold exactly the model's l layers, each at least one, the middle
    # ones k = ceil(l / p). The search only tries such p (search_grid._pp_candidates).
    wrong = [
        (layers, stages, _split_total(layers, stages))
        for layers in range(1, 257)
        for stages in range(1, layers + 1)
        if stages * -(-layers // stages) - layers <= 2 * (-(-layers // stages) - 1)
        and _split_total(layers, stages) != layers
    ]
    assert wrong == [], f"{len(wrong)} splits miscount, (l, p, total) e.g. {wrong[:5]}"


def test_pipeline_split_clamps_the_ends_at_one_layer() -> None:
    # 12 layers on 8 stages: k = 2, d = 4 > 2 (k - 1); the ends keep one layer each and the
    # busiest stages k: the bound memory and time use (an explicit layout may ask for it).
    first, middle, last = pipeline.pipeline_split(12, np.array([8.0]))
    assert (float(first[0]), float(middle[0]), float(last[0])) == (1.0, 2.0, 1.0)


def test_pipeline_split_vectorises_over_stage_counts() -> None:
    stages = np.array([1.0, 8.0, 16.0])
    first, middle, last = pipeline.pipeline_split(126, stages)
    assert_allclose(first, [126, 15, 7])  # 126 / 8: k = 16, d = 2, one off each end
    assert_allclose(middle, [126, 16, 8])
    assert_allclose(last, [126, 15, 7])


@pytest.mark.parametrize(
    ("stage", "expected"),
    [("first", (126, 7, 40, 7)), ("second", (126, 8, 41, 8)), ("last", (126, 7, 41, 7))],
)
def test_stage_layers_and_index(stage: str, expected: tuple[int, ...]) -> None:
    # pp = 1, 16, 2 (the second stage is the last one) and 16 again; 81 layers on 2 stages:
    # k = 41, d = 1, so the first holds 40 and the last 41.
    layers = [126, 126, 81, 126]
    stages = [1, 16, 2, 16]
    got = tuple(
        float(pipeline.stage_layers(n, p, stage)) for n, p in zip(layers, stages, strict=True)
    )
    assert got == expected
    assert_allclose(
        pipeline.stage_index(stage, np.array([1.0, 2.0, 16.0])),
        {"first": [0, 0, 0], "second": [0, 1, 1], "last": [0, 1, 15]}[stage],
    )
    assert pipeline.STAGES == ("first", "second", "last")


def megatron_in_flight(p: int, m: int, v: int, rank: int) -> float:
    """Micro-batches of its layers rank ``rank`` holds, from Megatron-LM's warm-up count.

    ``forward_backward_pipelining_with_interleaving``: 2 (p - i - 1) + (v - 1) p chunk
    forwards of warm-up, at most the m v chunk micro-batches of the step, then one more
    forward before the first backward; 1F1B (``..._without_interleaving``): p - i - 1
    warm-up forwards, then one. A chunk holds 1 / v of the rank's layers.
    """
    if p == 1:
        return 1.0
    if v == 1:
        return float(min(p - rank - 1, m - 1) + 1)
    warmup = 2 * (p - rank - 1) + (v - 1) * p
    return min(warmup + 1, m * v) / v


def test_micro_batches_in_flight_matches_megatron_warmup_count() -> None:
    for p in (1, 2, 3, 4, 8, 16):
        for v in (1, 2, 3, 4, 7):
            for m in (1, 2, p, 2 * p + 1, 64):
                for rank in range(p):
                    expected = megatron_in_flight(p, m, v, rank)
                    got = float(activations.micro_batches_in_flight(p, m, v, rank))
                    assert_allclose(got, expected, rtol=1e-12, err_msg=f"{p=} {v=} {m=} {rank=}")


def test_micro_batches_in_flight_per_rank_formulas() -> None:
    # 1F1B: rank i holds p - i; interleaved: p + (p - 1 - 2 i) / v (m large).
    p, m = 16, 1024
    ranks = np.arange(p, dtype=float)
    assert_allclose(activations.micro_batches_in_flight(p, m, 1, ranks), p - ranks)
    assert_allclose(
        activations.micro_batches_in_flight(p, m, 4, ranks), p + (p - 1 - 2 * ranks) / 4, rtol=1e-12
    )
    # Never more than the step's micro-batches; no pipeline keeps one.
    assert_allclose(activations.micro_batches_in_flight(p, 5, 1, ranks), np.minimum(p - ranks, 5))
    assert_allclose(activations.micro_batches_in_flight(1, 64, 1, 0), 1)


LLAMA3_405B_MODEL = config(
    num_layers=126,
    hidden_size=16384,
    num_attention_heads=128,
    num_kv_heads=8,
    ffn_hidden_size=53248,
    gated_mlp=True,
    vocab_size=128256,
    seq_len=8192,
)


def test_activation_bytes_per_stage_uneven_split() -> None:
    # tp 8 with sequence parallelism, pp 16, 1F1B, 16 micro-batches of one 8,192-token
    # sequence: the first stage holds 16 micro-batches x 7 layers, the second 15 x 8, the
    # last 1 x 7 plus the fp32 logits 4 s b V / t.
    tokens, tp, pp, m = 8192.0, 8, 16, 16
    layer = activations.activation_bytes_per_layer(LLAMA3_405B_MODEL, tokens, tp, True, 0)
    per_layer = float(layer)

    def stage(name: str) -> float:
        return float(
            activations.activation_bytes(
                LLAMA3_405B_MODEL, tokens, tp, pp, True, 0, m, 1, 2.0, stage=name
            )
        )

    logits = 4.0 * tokens * 128256 / tp
    assert_allclose(stage("first"), 16 * 7 * per_layer, rtol=1e-12)
    assert_allclose(stage("second"), 15 * 8 * per_layer, rtol=1e-12)
    assert_allclose(stage("last"), 1 * 7 * per_layer + logits, rtol=1e-12)


def test_activation_bytes_logits_only_on_the_last_stage_or_without_pipeline() -> None:
    tokens = 2048.0
    logits = float(activations.logits_bytes(GPT3, tokens, 8))
    per_layer = float(activations.activation_bytes_per_layer(GPT3, tokens, 8, True, 1))
    alone = activations.activation_bytes(GPT3, tokens, 8, 1, True, 1, 8, 1, stage="first")
    assert_allclose(alone, 96 * per_layer + logits, rtol=1e-12)
    last = activations.activation_bytes(GPT3, tokens, 8, 8, True, 1, 64, 1, stage="last")
    assert_allclose(last, 12 * per_layer + logits, rtol=1e-12)


def test_stage_parameters_ends_hold_the_embeddings() -> None:
    # Middle stages hold k layers; the first k - ceil(d/2) layers plus the input
    # embedding, the last k - floor(d/2) plus the LM head (V h each, split over t).
    tp, pp = 8, 16
    dense_layer, _ = memory.layer_parameters_per_device(LLAMA3_405B_MODEL, tp, 1)
    embedding = 128256 * 16384 / tp
    expected = {
        "first": 7 * dense_layer + embedding,
        "second": 8 * dense_layer,
        "last": 7 * dense_layer + embedding,
        "busiest": 8 * dense_layer + embedding,
    }
    for stage, value in expected.items():
        dense, expert = memory.stage_parameters(LLAMA3_405B_MODEL, tp, pp, 1, stage)
        assert_allclose(dense, value, rtol=1e-12, err_msg=stage)
        assert_allclose(expert, 0.0)
    # Summed over the 16 stages: every layer once, two embedding matrices (untied).
    first, middle, last = (
        float(memory.stage_parameters(LLAMA3_405B_MODEL, tp, pp, 1, s)[0]) for s in pipeline.STAGES
    )
    total = (first + 14 * middle + last) * tp
    assert_allclose(total, arithmetic.total_parameters(LLAMA3_405B_MODEL), rtol=1e-6)


def test_mla_activations_keep_the_heads_split_and_the_latents_whole() -> None:
    """Per token, MLA keeps Q and K (n d_qk / t each), V and the output projection's input
    (n d_v / t each) and the up-projections' inputs, the query and KV latents and the rotary
    key, whole on every rank: a wider KV latent adds its width, a wider value head 2 n / t
    per extra dimension (16-bit values)."""
    from .test_model import DEEPSEEK_V2, DEEPSEEK_V2_MLA

    tokens, tp = 4096.0, 8

    def per_layer(**mla: int) -> float:
        model = dataclasses.replace(DEEPSEEK_V2, mla=dataclasses.replace(DEEPSEEK_V2_MLA, **mla))
        return float(activations.activation_bytes_per_layer(model, tokens, tp, True, 0))

    base = per_layer()
    assert_allclose(per_layer(kv_lora_rank=512 + 64) - base, tokens * 2 * 64, rtol=1e-12)
    assert_allclose(per_layer(v_head_dim=128 + 32) - base, tokens * 2 * 2 * 128 * 32 / tp,
                    rtol=1e-12)  # fmt: skip


@pytest.mark.parametrize(
    ("needed", "verdict"),
    [(40.0, "fits"), (43.2, "fits"), (43.3, "tight"), (48.0, "tight"), (48.1, "does_not_fit")],
)
def test_memory_verdict_against_usable_and_device_memory(needed: float, verdict: str) -> None:
    # 48 GiB device, 10 % headroom: 43.2 GiB usable.
    assert memory.memory_verdict(needed, 43.2, 48.0) == verdict


def test_result_memory_verdict_reads_the_key_then_older_results() -> None:
    assert memory.result_memory_verdict({"memory_verdict": "tight", "fits_in_memory": True}) == (
        "tight"
    )
    over = {"fits_in_memory": True, "memory_headroom": {"usable_gib": 43.2, "headroom_gib": -3.8}}
    assert memory.result_memory_verdict(over) == "tight"
    room = {"fits_in_memory": True, "memory_headroom": {"usable_gib": 43.2, "headroom_gib": 1.0}}
    assert memory.result_memory_verdict(room) == "fits"
    assert memory.result_memory_verdict({"fits_in_memory": False}) == "does_not_fit"
