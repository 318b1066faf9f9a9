"""Memory per device against Rajbhandari et al. 2020 and Korthikanti et al. 2022."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose

from estimator.core import memory
from estimator.core import model as arithmetic

from .test_model import GPT3, config

S, B, H, A = 2048, 4, 12288, 96  # Korthikanti et al. 2022 notation: s, b, h, a


def per_layer(tp: int, sp: bool, recompute: int, flash: bool = False) -> float:
    return float(
        memory.activation_bytes_per_layer(
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
    assert_allclose(memory.micro_batches_in_flight(8, 64, 1), 8)
    assert_allclose(memory.micro_batches_in_flight(8, 4, 1), 4)
    assert_allclose(memory.micro_batches_in_flight(8, 64, 4), 8 * (1 + 7 / 32), rtol=1e-12)
    assert_allclose(memory.micro_batches_in_flight(1, 64, 1), 1)


def test_activation_bytes_pipeline_first_stage_holds_all_layers() -> None:
    # With 1F1B and m >= p the first stage holds p micro-batches x l/p layers = l layers.
    tokens = np.array(2048.0)
    one_stage = memory.activation_bytes(GPT3, tokens, 8, 1, True, 1, 1, 1)
    logits = memory.logits_bytes(GPT3, tokens, 8)
    eight = memory.activation_bytes(GPT3, tokens, 8, 8, True, 1, 64, 1)
    assert_allclose(eight, one_stage - logits, rtol=1e-12)


def test_allowance_bytes_fixed_plus_fragmentation() -> None:
    assert_allclose(memory.allowance_bytes(10 * memory.GIB), 2.5 * memory.GIB, rtol=1e-12)


def test_activation_bytes_per_layer_without_dropout_is_32_sbh() -> None:
    # No dropout (modern LLMs): the two 1-byte masks per token go, 34 -> 32 s b h / t.
    t = 8
    stored = memory.activation_bytes_per_layer(GPT3, S * B, t, True, 1)
    assert_allclose(stored, S * B * H * 32 / t, rtol=1e-12)
