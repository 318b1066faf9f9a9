"""The scenario keys the project adds (docs/scenario-keys.md) and the terms behind them:
head_dim, tile quantization, fp8 recipes, offload, TPU slices, MoE routing, tf32."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from numpy.testing import assert_allclose

from estimator.core import ScenarioError, estimate, validate_scenario
from estimator.core import model as arithmetic
from estimator.core.calibration import FAMILY_EFFICIENCY, SOFTWARE
from estimator.core.gemm import gemm_flop_time, padded
from estimator.core.layout import evaluate_layouts
from estimator.core.layout_arrays import Layouts
from estimator.core.workload import build_workload

from .scenarios import GPT3_175B, SMALL, scenario

#: Gemma-7B-like attention: 16 heads of 256 on a 3072-wide model (query width 4096).
WIDE_HEADS = {"hidden_size": 3072, "num_attention_heads": 16, "head_dim": 256}
MOE = {
    "moe": {"num_experts": 8, "top_k": 2, "expert_ffn_hidden_size": 8192},
    "gated_mlp": True,
}
TPU_FSDP: dict[str, Any] = {
    "cluster": {"accelerator": "TPU-v5p", "num_gpus": 256},
    "parallelism": {
        "tp": 1, "pp": 1, "dp": 256, "micro_batch_size": 1, "zero_stage": 3, "recompute": "full",
    },
    "training": {"global_batch_size": 256},
}  # fmt: skip


def test_head_dim_defaults_to_hidden_over_heads() -> None:
    model = validate_scenario(SMALL).model
    explicit = validate_scenario(
        scenario(SMALL, model={"head_dim": model.hidden_size // model.num_attention_heads})
    )
    assert explicit.model == model
    assert (
        estimate(SMALL)["tokens_per_s_per_gpu"]
        == estimate(scenario(SMALL, model={"head_dim": 128}))["tokens_per_s_per_gpu"]
    )


def test_head_dim_sets_attention_weights_and_flops() -> None:
    model = validate_scenario(scenario(SMALL, model=WIDE_HEADS)).model
    h, q, kv = 3072, 16 * 256, model.num_kv_heads * 256
    assert arithmetic.attention_parameters(model) == 2 * h * q + 2 * h * kv
    assert arithmetic.attention_flops_per_token(model) == 12 * model.num_layers * q * model.seq_len


def test_head_dim_lets_hidden_size_not_divide_by_heads() -> None:
    data = scenario(SMALL, model={"hidden_size": 2050, "num_attention_heads": 16, "head_dim": 128})
    assert validate_scenario(data).model.attention_width == 2048
    with pytest.raises(ScenarioError) as error:
        validate_scenario(scenario(SMALL, model={"hidden_size": 2050, "num_attention_heads": 16}))
    assert error.value.key == "model.hidden_size"
    with pytest.raises(ScenarioError) as error:
        validate_scenario(scenario(SMALL, model={"head_dim": 0}))
    assert error.value.key == "model.head_dim"


def test_tile_quantization_pads_a_dimension_to_the_tile() -> None:
    w = build_workload(validate_scenario(GPT3_175B))
    tile = w.efficiency.matmul_tile
    assert padded(50257, tile) == 50304 == math.ceil(50257 / 128) * 128
    assert padded(4096, tile) == 4096
    unpadded = gemm_flop_time(w, 4096, 12288, 50257)
    assert unpadded == gemm_flop_time(w, 4096, 12288, 50304)
    assert unpadded > gemm_flop_time(w, 4096, 12288, 50176)


def test_unpadded_vocabulary_costs_time_not_model_flops() -> None:
    padded_vocab = estimate(scenario(GPT3_175B, model={"vocab_size": 51200}))
    odd_vocab = estimate(scenario(GPT3_175B, model={"vocab_size": 51201}))
    # One more token type adds 1/51200 of the head's FLOPs but a whole 128-wide tile.
    assert odd_vocab["mfu"] < padded_vocab["mfu"]


@pytest.mark.parametrize(("accelerator", "blockwise_native"), [("H100-SXM", False), ("B200", True)])
def test_fp8_recipes_rowwise_slower_blockwise_native_on_blackwell(
    accelerator: str, blockwise_native: bool
) -> None:
    def speed(recipe: str) -> float:
        data = scenario(
            SMALL,
            cluster={"accelerator": accelerator},
            training={"precision": "fp8", "fp8_recipe": recipe},
        )
        return estimate(data)["tokens_per_s_per_gpu"]

    tensorwise, rowwise, blockwise = speed("tensorwise"), speed("rowwise"), speed("blockwise")
    assert rowwise < tensorwise
    if blockwise_native:
        # Same matmul speed; only the extra amax pass over the inputs costs time.
        assert rowwise < blockwise < tensorwise
    else:
        assert_allclose(blockwise, rowwise, rtol=1e-12)


def test_fp8_mfu_is_against_fp8_peak_and_mfu_bf16_compares() -> None:
    bf16 = estimate(SMALL)
    fp8 = estimate(scenario(SMALL, training={"precision": "fp8"}))
    assert fp8["mfu_peak"] == {"precision": "fp8", "tflops": 1978.9}
    assert_allclose(fp8["mfu_bf16"], fp8["mfu"] * 1978.9 / 989.4, rtol=1e-9)
    assert bf16["mfu_bf16"] == bf16["mfu"]
    assert fp8["mfu_bf16"] > bf16["mfu_bf16"]  # faster on the common yardstick


def test_tf32_is_faster_than_true_fp32() -> None:
    fp32 = estimate(scenario(SMALL, training={"precision": "fp32"}))
    tf32 = estimate(scenario(SMALL, training={"precision": "tf32"}))
    assert fp32["tokens_per_s_per_gpu"] < tf32["tokens_per_s_per_gpu"]
    assert fp32["memory_per_gpu_gib"]["weights"] == tf32["memory_per_gpu_gib"]["weights"]


def test_activation_offload_frees_memory_and_costs_host_copies() -> None:
    base = scenario(GPT3_175B, parallelism={"recompute": "none"})
    kept = estimate(base)
    offloaded = estimate(scenario(base, parallelism={"activation_offload": True}))
    assert (
        offloaded["memory_per_gpu_gib"]["activations"]
        < kept["memory_per_gpu_gib"]["activations"] / 4
    )
    assert offloaded["step_time_s"] >= kept["step_time_s"]
    assert offloaded["parallelism"]["activation_offload"] is True


def test_optimizer_offload_moves_adam_to_the_host() -> None:
    # DeepSpeed (ZeRO-Offload, ZeRO-Infinity) offers both offload modes.
    base = scenario(SMALL, framework="deepspeed")
    kept = estimate(base)
    for mode in ("optimizer", "optimizer_and_params"):
        out = estimate(scenario(base, training={"offload": mode}))
        assert out["memory_per_gpu_gib"]["optimizer"] == 0.0
        assert out["step_time_s"] > kept["step_time_s"]
    both = estimate(scenario(base, training={"offload": "optimizer_and_params"}))
    assert both["memory_per_gpu_gib"]["weights"] < kept["memory_per_gpu_gib"]["weights"]


def test_cpu_adam_time_is_parameters_times_traffic_over_host_bandwidth() -> None:
    data = scenario(SMALL, training={"offload": "optimizer"})
    valid = validate_scenario(data)
    w = build_workload(valid)
    assert valid.parallelism is not None
    layout = Layouts.single(valid.parallelism)
    slow = dataclasses.replace(SOFTWARE, cpu_adam_bytes_per_s=SOFTWARE.cpu_adam_bytes_per_s / 2)
    fast = evaluate_layouts(w, layout).step_time[0]
    slower = evaluate_layouts(build_workload(valid, software=slow), layout).step_time[0]
    parameters = w.parameters / (valid.parallelism.tp * valid.parallelism.pp)
    shard = parameters / (valid.parallelism.dp * valid.parallelism.cp)
    extra = shard * SOFTWARE.optimizer_bytes_per_parameter / SOFTWARE.cpu_adam_bytes_per_s
    # Both margins are shares of the margin-free step (layout.evaluate_layouts); with pp = 2
    # and untied embeddings each stage holds exactly half the parameters, so this is exact.
    overhead = valid.margins.framework_overhead * w.efficiency.overhead_scale  # the stack's share
    margin = 1 + overhead + valid.margins.network_jitter * w.jitter_scale
    assert_allclose(slower - fast, extra * margin, rtol=1e-9)


def test_tpu_slices_send_data_parallel_traffic_over_dcn() -> None:
    one = estimate(scenario(SMALL, **TPU_FSDP))
    four = estimate(
        scenario(SMALL, **{**TPU_FSDP, "cluster": {**TPU_FSDP["cluster"], "num_slices": 4}})
    )
    assert four["step_time_s"] > one["step_time_s"]
    with pytest.raises(ScenarioError) as error:
        validate_scenario(scenario(SMALL, cluster={"num_slices": 2}))
    assert error.value.key == "cluster.num_slices"
    with pytest.raises(ScenarioError) as error:
        validate_scenario(
            scenario(SMALL, **{**TPU_FSDP, "cluster": {**TPU_FSDP["cluster"], "num_slices": 3}})
        )
    assert error.value.key == "cluster.num_slices"


def test_tpu_memory_has_no_cuda_reserve_or_allocator_fragmentation() -> None:
    tpu, gpu = FAMILY_EFFICIENCY["google-tpu"], FAMILY_EFFICIENCY["nvidia-hopper"]
    assert tpu.reserved_memory_gib < gpu.reserved_memory_gib
    assert tpu.fragmentation < gpu.fragmentation


def test_moe_load_imbalance_slows_the_experts_only() -> None:
    data = scenario(SMALL, model=MOE)
    valid = validate_scenario(data)
    assert valid.parallelism is not None
    layout = Layouts.single(valid.parallelism)

    def step(imbalance: float, model_data: dict) -> float:
        software = dataclasses.replace(SOFTWARE, moe_load_imbalance=imbalance)
        v = validate_scenario(model_data)
        return float(evaluate_layouts(build_workload(v, software=software), layout).step_time[0])

    assert step(0.3, data) > step(0.0, data)
    assert step(0.3, SMALL) == step(0.0, SMALL)


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({"training": {"fp8_recipe": "per-channel"}}, "training.fp8_recipe"),
        ({"training": {"offload": "disk"}}, "training.offload"),
        ({"training": {"optimizer": "adam"}}, "training.optimizer"),
        ({"training": {"method": {"type": "dora", "rank": 16}}}, "training.method.type"),
        ({"training": {"method": {"type": "lora", "rank": 0}}}, "training.method.rank"),
        ({"training": {"method": {"type": "lora", "targets": ["embeddings"]}}},
         "training.method.targets"),
        ({"training": {"method": {"type": "lora", "frozen_layers": 2}}},
         "training.method.frozen_layers"),
        ({"training": {"method": {"type": "full", "rank": 8}}}, "training.method.rank"),
        ({"training": {"method": {"type": "full", "frozen_layers": 99}}},
         "training.method.frozen_layers"),
        ({"training": {"method": "lora"}}, "training.method"),
        ({"training": {"method": {"type": "qlora"}, "precision": "fp8"},
          "cluster": {"accelerator": "H100-SXM"}}, "training.precision"),
        ({"parallelism": {"activation_offload": "yes"}}, "parallelism.activation_offload"),
        ({"training": {"precision": "tf32"}, "cluster": {"accelerator": "TPU-v5p"}},
         "training.precision"),
    ],
)  # fmt: skip
def test_new_keys_reject_bad_values_naming_the_key(changes: dict, key: str) -> None:
    with pytest.raises(ScenarioError) as error:
        validate_scenario(scenario(SMALL, **changes))
    assert error.value.key == key
