"""constants.py: each named factor equals the number its paper derives, and the formulas that
use it reproduce the paper's closed forms."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose

from estimator.core import comms, constants, finetune, validate_scenario
from estimator.core import model as arithmetic
from estimator.core.scenario import MethodConfig, ModelConfig

from .scenarios import GPT3_175B


@pytest.fixture(scope="module")
def gpt3() -> ModelConfig:
    return validate_scenario(GPT3_175B).model


def test_training_flops_are_2_forward_and_4_backward_per_parameter() -> None:
    """Kaplan et al. 2020, eq. 2.2 and Hoffmann et al. 2022: C = 6 N per token."""
    assert constants.FORWARD_FLOPS_PER_PARAMETER == 2.0
    assert constants.BACKWARD_FLOPS_PER_PARAMETER == 4.0
    assert constants.TRAINING_FLOPS_PER_PARAMETER == 6.0
    assert constants.BACKWARD_TO_FORWARD == 2.0
    assert constants.FROZEN_FLOPS_PER_PARAMETER == 4.0  # no weight gradient
    assert constants.FORWARD_BACKWARD_PASSES == 3.0
    assert constants.ATTENTION_SCORE_FORWARD_FLOPS == 4.0
    assert constants.ATTENTION_SCORE_TRAINING_FLOPS == 12.0


def test_model_flops_per_token_is_narayanan_eq3_without_recompute(gpt3: ModelConfig) -> None:
    """72 B s l h^2 (1 + s/6h + V/12lh) per iteration of B s tokens."""
    layers, h, s, v = 96, 12288, 2048, 51200
    expected = 72 * layers * h**2 * (1 + s / (6 * h) + v / (12 * layers * h))
    assert_allclose(arithmetic.model_flops_per_token(gpt3), expected, rtol=1e-12)


def test_recompute_adds_one_forward_as_in_narayanan_eq3(gpt3: ModelConfig) -> None:
    """With full recomputation: 96 B s l h^2 (1 + s/6h + V/16lh) per iteration."""
    layers, h, s, v = 96, 12288, 2048, 51200
    expected = 96 * layers * h**2 * (1 + s / (6 * h) + v / (16 * layers * h))
    assert_allclose(arithmetic.hardware_flops_per_token(gpt3, "full"), expected, rtol=1e-12)


def test_lora_flops_count_frozen_weights_at_four_per_token(gpt3: ModelConfig) -> None:
    """Frozen weights run their forward and input gradient, not their weight gradient."""
    method = MethodConfig(type="lora", rank=8, targets=("q_proj",))
    layers = arithmetic.layer_parameters(gpt3)
    head = 51200 * 12288
    adapters = finetune.adapter_parameters(gpt3, method)
    expected = 4 * (layers + head) + arithmetic.attention_flops_per_token(gpt3) + 6 * adapters
    assert_allclose(finetune.training_flops_per_token(gpt3, method), expected, rtol=1e-12)


def test_mixed_precision_adam_keeps_2_plus_2_plus_12_bytes() -> None:
    """Rajbhandari et al. 2020, section 3.1: K = 12 (fp32 master, m, v), 16 B in all."""
    assert constants.ADAM_MIXED_PRECISION_STATE_BYTES == 12.0
    assert constants.MIXED_PRECISION_ADAM_BYTES == 16.0
    assert finetune.state_bytes("bf16", "adamw", adapters=False) == (2.0, 2.0, 12.0)
    assert finetune.state_bytes("fp32", "adamw", adapters=False) == (4.0, 4.0, 8.0)


def test_all_reduce_is_two_all_gathers_with_the_nccl_tests_bus_factor() -> None:
    """nccl-tests: bus bandwidth = algorithm bandwidth x 2 (n - 1)/n for all-reduce."""
    assert constants.ALL_REDUCE_PHASES == 2.0
    size, ranks, bandwidth = 1e9, np.array([2.0, 8.0, 64.0]), 100e9
    all_reduce = comms.all_reduce_time(size, ranks, bandwidth, 0.0)
    assert_allclose(all_reduce, 2 * (ranks - 1) / ranks * size / bandwidth, rtol=1e-12)
    assert_allclose(all_reduce, 2 * comms.all_gather_time(size, ranks, bandwidth, 0.0), rtol=0)


def test_collectives_per_layer_follow_their_papers() -> None:
    """Korthikanti et al. 2022, section 4.2.2: 2 + 2 tensor-parallel all-reduces per layer;
    GShard: dispatch and combine per pass; ring attention: K/V once forward, twice back."""
    tp = constants.TP_COLLECTIVES_FORWARD + constants.TP_COLLECTIVES_BACKWARD
    ep = constants.EP_ALL_TO_ALLS_FORWARD + constants.EP_ALL_TO_ALLS_BACKWARD
    cp = constants.CP_EXCHANGES_FORWARD + constants.CP_EXCHANGES_BACKWARD
    assert (tp, ep, cp) == (4.0, 4.0, 3.0)
    assert constants.ZERO3_WEIGHT_GATHERS == 2.0  # 3 Psi per step with the gradients
    assert constants.PIPELINE_SENDS_PER_MICRO_BATCH == 2.0


def test_flashattention_factors_follow_dao_2023() -> None:
    assert constants.ATTENTION_BACKWARD_FACTOR == 5 / 2  # 5 matmuls against 2
    assert constants.CAUSAL_FRACTION == 0.5


def test_units_are_exact() -> None:
    assert constants.GIB == 2**30
    assert (constants.TERA, constants.GIGA, constants.BITS_PER_BYTE) == (1e12, 1e9, 8.0)
    assert constants.SECONDS_PER_DAY == 24 * constants.SECONDS_PER_HOUR == 86400.0
    assert constants.HOURS_PER_DAY == 24.0
    assert (constants.FP32_BYTES, constants.HALF_PRECISION_BYTES, constants.FP8_BYTES) == (
        4.0,
        2.0,
        1.0,
    )
