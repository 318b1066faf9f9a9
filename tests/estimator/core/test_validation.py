"""validate_scenario: every bad field is rejected with its dotted key and a reason."""

from __future__ import annotations

from typing import Any

import pytest

from estimator.core import ScenarioError, validate_scenario
from estimator.core.scenario import Scenario

from .scenarios import GPT3_175B, SMALL, scenario

#: DeepSeek-V3's multi-head latent attention (HF config.json names).
MLA = {"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
       "qk_rope_head_dim": 64, "v_head_dim": 128}  # fmt: skip


def rejected(data: Any) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        validate_scenario(data)
    return info.value


def test_validate_scenario_accepts_contract_example() -> None:
    result = validate_scenario(GPT3_175B)
    assert isinstance(result, Scenario)
    assert result.parallelism is not None
    assert result.parallelism.sequence_parallel is True
    assert result.model.num_kv_heads == 96
    assert result.model.ffn_hidden_size == 4 * 12288
    assert result.cluster.gpus_per_node == 8


def test_validate_scenario_negative_layers_message() -> None:
    error = rejected(scenario(GPT3_175B, model={"num_layers": -3}))
    assert str(error) == "model.num_layers: must be a positive integer, got -3"
    assert error.key == "model.num_layers"
    assert error.reason == "must be a positive integer, got -3"


@pytest.mark.parametrize(
    ("sections", "key"),
    [
        ({"model": {"hidden_size": 12288.5}}, "model.hidden_size"),
        ({"model": {"num_attention_heads": True}}, "model.num_attention_heads"),
        ({"model": {"num_kv_heads": 5}}, "model.num_kv_heads"),
        ({"model": {"gated_mlp": "yes"}}, "model.gated_mlp"),
        ({"model": {"hidden_size": 1000}}, "model.hidden_size"),
        (
            {"model": {"moe": {"num_experts": 4, "top_k": 8, "expert_ffn_hidden_size": 8}}},
            "model.moe.top_k",
        ),
        ({"model": {"colour": "red"}}, "model.colour"),
        (
            {"model": {"mla": {"qk_nope_head_dim": 128, "v_head_dim": 128}}},
            "model.mla.kv_lora_rank",
        ),
        ({"model": {"mla": {**MLA, "q_lora_rank": -1}}}, "model.mla.q_lora_rank"),
        ({"model": {"mla": {**MLA, "rank": 4}}}, "model.mla.rank"),
        ({"model": {"mla": MLA, "head_dim": 192}}, "model.head_dim"),
        ({"model": {"mla": MLA, "num_kv_heads": 8}}, "model.num_kv_heads"),
        (
            {
                "model": {
                    "moe": {
                        "num_experts": 8,
                        "top_k": 2,
                        "expert_ffn_hidden_size": 8,
                        "first_dense_layers": 96,
                    }
                }
            },
            "model.moe.first_dense_layers",
        ),
        ({"training": {"tokens": -1}}, "training.tokens"),
        ({"training": {"tokens": float("nan")}}, "training.tokens"),
        ({"training": {"precision": "int4"}}, "training.precision"),
        ({"cluster": {"accelerator": "Z80"}}, "cluster.accelerator"),
        ({"cluster": {"num_gpus": 0}}, "cluster.num_gpus"),
        ({"cluster": {"num_gpus": 10**9}}, "cluster.num_gpus"),
        ({"model": {"vocab_size": 2**50}}, "model.vocab_size"),
        ({"cluster": {"gpus_per_node": -8}}, "cluster.gpus_per_node"),
        ({"parallelism": {"dp": 8}}, "parallelism"),
        ({"parallelism": {"tp": 5, "dp": 16 * 8 // 5}}, "parallelism"),
        ({"parallelism": {"zero_stage": 4}}, "parallelism.zero_stage"),
        ({"parallelism": {"recompute": "some"}}, "parallelism.recompute"),
        ({"parallelism": {"micro_batch_size": 0}}, "parallelism.micro_batch_size"),
        ({"parallelism": {"micro_batch_size": 512}}, "parallelism.micro_batch_size"),
        ({"parallelism": {"pipeline_schedule": "zigzag"}}, "parallelism.pipeline_schedule"),
        ({"parallelism": {"virtual_stages": 2}}, "parallelism.virtual_stages"),
        ({"parallelism": {"ep": 2}}, "parallelism.ep"),
        ({"parallelism": {"cp": 3, "dp": 16, "pp": 8, "tp": 8}}, "parallelism"),
        ({"parallelism": [1, 2]}, "parallelism"),
        ({"margins": {"framework_overhead": -0.1}}, "margins.framework_overhead"),
        ({"margins": {"network_jitter": "high"}}, "margins.network_jitter"),
    ],
)
def test_validate_scenario_names_the_key(sections: dict[str, Any], key: str) -> None:
    assert rejected(scenario(GPT3_175B, **sections)).key == key


def test_mla_sets_the_head_widths_and_first_dense_layers_count() -> None:
    moe = {"num_experts": 8, "top_k": 2, "expert_ffn_hidden_size": 2048, "first_dense_layers": 3}
    model = validate_scenario(scenario(GPT3_175B, model={"mla": MLA, "moe": moe})).model
    assert model.mla is not None
    assert model.head_dim == 192  # 128 from the latent + 64 rotary
    assert model.value_head_dim == 128
    assert model.attention_width == 96 * 192
    assert model.output_width == 96 * 128
    assert model.moe is not None
    assert model.moe.first_dense_layers == 3


def test_validate_scenario_heads_not_divisible_by_tp() -> None:
    data = scenario(
        SMALL, model={"num_attention_heads": 16}, parallelism={"tp": 4, "pp": 1, "dp": 4}
    )
    assert validate_scenario(data).parallelism is not None
    data = scenario(
        SMALL,
        model={"num_attention_heads": 8, "hidden_size": 2048},
        cluster={"num_gpus": 16},
        parallelism={"tp": 16, "pp": 1, "dp": 1},
    )
    assert rejected(data).key == "parallelism.tp"


def test_validate_scenario_kv_heads_must_divide_or_be_divided_by_tp() -> None:
    ok = scenario(SMALL, model={"num_kv_heads": 1}, parallelism={"tp": 2})
    assert validate_scenario(ok).model.num_kv_heads == 1
    bad = scenario(
        SMALL,
        model={"num_kv_heads": 2, "num_attention_heads": 12, "hidden_size": 1536},
        cluster={"num_gpus": 24},
        parallelism={"tp": 3, "pp": 2, "dp": 4},
    )
    assert rejected(bad).key == "parallelism.tp"


def test_validate_scenario_more_stages_than_layers() -> None:
    data = scenario(SMALL, cluster={"num_gpus": 64}, parallelism={"pp": 32, "dp": 1})
    assert rejected(data).key == "parallelism.pp"


def test_validate_scenario_precision_missing_on_chip() -> None:
    data = scenario(SMALL, cluster={"accelerator": "V100-32GB-SXM"})
    error = rejected(data)
    assert error.key == "training.precision"
    assert "bf16" in error.reason


def test_validate_scenario_missing_section_and_version() -> None:
    data = scenario(SMALL)
    del data["training"]
    assert rejected(data).key == "training"
    assert rejected({**SMALL, "format_version": 2}).key == "format_version"
    assert rejected([1, 2]).key == "scenario"


def test_validate_scenario_auto_parallelism_is_none() -> None:
    assert validate_scenario(scenario(SMALL, parallelism="auto")).parallelism is None


def test_validate_scenario_accelerator_spec_overrides_catalog() -> None:
    data = scenario(
        SMALL, cluster={"accelerator_spec": {"memory_gib": 96, "peak_tflops": {"bf16": 1000}}}
    )
    spec = validate_scenario(data).cluster.spec
    assert spec.memory_gib == 96.0
    assert spec.peak_tflops["bf16"] == 1000.0
    assert spec.peak_tflops["fp8"] == 1978.9  # other precisions kept from the catalog


def test_validate_scenario_custom_accelerator_needs_core_figures() -> None:
    figures = {
        "memory_gib": 64,
        "memory_bandwidth_tbs": 2.0,
        "peak_tflops": {"bf16": 500},
        "intra_node_bandwidth_gbs": 200,
        "inter_node_bandwidth_gbps": 400,
    }
    data = scenario(SMALL, cluster={"accelerator": "X1", "accelerator_spec": figures})
    assert validate_scenario(data).cluster.spec.family == "generic"
    del figures["memory_gib"]
    data = scenario(SMALL, cluster={"accelerator": "X1", "accelerator_spec": figures})
    assert rejected(data).key == "cluster.accelerator_spec.memory_gib"


def test_validate_scenario_bad_override_value() -> None:
    data = scenario(SMALL, cluster={"accelerator_spec": {"memory_gib": -1}})
    assert rejected(data).key == "cluster.accelerator_spec.memory_gib"
    data = scenario(SMALL, cluster={"accelerator_spec": {"peak_tflops": {"int3": 5}}})
    assert rejected(data).key == "cluster.accelerator_spec.peak_tflops.int3"


@pytest.mark.parametrize(
    ("power_limit_w", "reason"),
    [
        (0, "must be a positive number of watts, got 0"),
        (-500, "must be a positive number of watts, got -500"),
        ("500", "must be a positive number of watts, got '500'"),
        (True, "must be a positive number of watts, got True"),
        (float("inf"), "must be a positive number of watts, got inf"),
        (800, "must not exceed H100-SXM's TDP of 700 W"),
        (400, "must be at least 409 W for H100-SXM (58% of its 700 W TDP, the lowest limit"),
    ],
)
def test_validate_scenario_bad_power_limit(power_limit_w: Any, reason: str) -> None:
    error = rejected(scenario(SMALL, cluster={"power_limit_w": power_limit_w}))
    assert error.key == "cluster.power_limit_w"
    assert error.reason.startswith(reason)


def test_validate_scenario_power_limit_needs_a_tdp() -> None:
    figures = {
        "memory_gib": 64, "memory_bandwidth_tbs": 2.0, "peak_tflops": {"bf16": 500},
        "intra_node_bandwidth_gbs": 200, "inter_node_bandwidth_gbps": 400,
    }  # fmt: skip
    cluster = {"accelerator": "X1", "accelerator_spec": figures, "power_limit_w": 300}
    error = rejected(scenario(SMALL, cluster=cluster))
    assert error.key == "cluster.power_limit_w"
    assert "no TDP" in error.reason
    figures["tdp_w"] = 400
    spec = validate_scenario(scenario(SMALL, cluster=cluster)).cluster.spec
    assert spec.power_limit_w == 300.0
    assert spec.datasheet_peak_tflops == {"bf16": 500.0}
    assert spec.peak_tflops["bf16"] < 500.0


def test_validate_scenario_power_limit_absent_or_null_is_the_tdp() -> None:
    for cluster in ({}, {"power_limit_w": None}):
        spec = validate_scenario(scenario(SMALL, cluster=cluster)).cluster.spec
        assert spec.power_limit_w == 0.0
        assert spec.peak_tflops["bf16"] == 989.4
