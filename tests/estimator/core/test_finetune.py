"""Fine-tuning (estimator/core/finetune.py): LoRA/QLoRA parameters, bytes and FLOPs, the
optimizer choices and offload, checked against the papers' formulas and published figures."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from numpy.testing import assert_allclose

from estimator.core import ScenarioError, estimate, finetune, validate_scenario
from estimator.core import model as arithmetic
from estimator.core.scenario import MethodConfig, ModelConfig

from .scenarios import GPT3_175B_MODEL, scenario

#: LLaMA-65B (Touvron et al. 2023, table 2; its config.json): the QLoRA paper's headline model.
LLAMA_65B: dict[str, Any] = {
    "name": "LLaMA-65B", "num_layers": 80, "hidden_size": 8192, "num_attention_heads": 64,
    "ffn_hidden_size": 22016, "gated_mlp": True, "vocab_size": 32000, "seq_len": 512,
}  # fmt: skip
#: Llama 2 7B (meta-llama/Llama-2-7b-hf config.json).
LLAMA2_7B = ModelConfig(
    name="Llama 2 7B", num_layers=32, hidden_size=4096, num_attention_heads=32, num_kv_heads=32,
    ffn_hidden_size=11008, gated_mlp=True, vocab_size=32000, seq_len=4096, tied_embeddings=False,
)  # fmt: skip
LLAMA3_8B_MODEL: dict[str, Any] = {
    "name": "Llama 3 8B", "num_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
    "num_kv_heads": 8, "ffn_hidden_size": 14336, "gated_mlp": True, "vocab_size": 128256,
    "seq_len": 4096,
}  # fmt: skip


def one_gpu(method: dict[str, Any], accelerator: str = "L40S", **training: Any) -> dict[str, Any]:
    """LLaMA-65B on one device, batch 1 x 512 tokens with gradient checkpointing: the
    QLoRA paper's Guanaco 65B setup (r = 64 on every linear layer)."""
    return {
        "format_version": 1,
        "model": LLAMA_65B,
        "training": {
            "tokens": 1e8, "global_batch_size": 16, "precision": "bf16", "method": method,
            **training,
        },
        "cluster": {"accelerator": accelerator, "num_gpus": 1},
        "parallelism": {
            "tp": 1, "pp": 1, "dp": 1, "micro_batch_size": 1, "zero_stage": 0,
            "recompute": "full",
        },
    }  # fmt: skip


def node(method: dict[str, Any], **training: Any) -> dict[str, Any]:
    """Llama 3 8B on one 8 x H100 node, FSDP (ZeRO-3), 1B tokens."""
    return {
        "format_version": 1,
        "model": LLAMA3_8B_MODEL,
        "training": {
            "tokens": 1e9, "global_batch_size": 64, "precision": "bf16", "method": method,
            **training,
        },
        "cluster": {"accelerator": "H100-SXM", "num_gpus": 8},
        "parallelism": {
            "tp": 1, "pp": 1, "dp": 8, "micro_batch_size": 1, "zero_stage": 3,
            "recompute": "full",
        },
        "framework": "hf-peft",
    }  # fmt: skip


def test_lora_parameters_match_peft_for_llama2_7b_r64_all_linear() -> None:
    # PEFT's print_trainable_parameters() for Llama-2-7b with r = 64 on q, k, v, o, gate,
    # up and down (the QLoRA recipe): "trainable params: 159,907,840". Formula: Hu et al.
    # 2021 section 4.1, r (d_in + d_out) per adapted matrix.
    method = MethodConfig(type="lora", rank=64)
    assert finetune.adapter_parameters(LLAMA2_7B, method) == 159_907_840
    # Llama 3 8B, r = 16 on every linear layer (Unsloth's and torchtune's recipes):
    # "trainable params: 41,943,040".
    llama3 = validate_scenario(node({"type": "lora"})).model
    assert finetune.adapter_parameters(llama3, MethodConfig(type="lora", rank=16)) == 41_943_040
    attention_only = MethodConfig(type="lora", rank=8, targets=("attention",))
    assert finetune.adapter_parameters(LLAMA2_7B, attention_only) == 32 * 4 * 8 * (4096 + 4096)


def test_nf4_double_quantisation_bits_per_weight() -> None:
    # QLoRA section 3: double quantisation brings the constants from 32/64 = 0.5 to
    # 8/64 + 32/(64 * 256) = 0.127 bits per parameter.
    assert abs(finetune.NF4_BITS - 4.0 - 0.127) < 5e-4


def test_qlora_65b_fits_on_one_48gb_gpu_and_full_bf16_finetune_does_not() -> None:
    # QLoRA abstract: "finetune a 65B parameter model on a single 48GB GPU".
    qlora = estimate(one_gpu({"type": "qlora", "rank": 64}))
    assert qlora["fits_in_memory"], qlora["memory_per_gpu_gib"]
    assert qlora["framework"]["id"] == "hf-peft"
    full = estimate(one_gpu({"type": "full"}, accelerator="H100-SXM"))
    assert not full["fits_in_memory"]
    # Rajbhandari et al. 2020: 16 B per parameter of model state without sharding.
    states = sum(full["memory_per_gpu_gib"][k] for k in ("weights", "gradients", "optimizer"))
    assert_allclose(states * 2**30, 16 * full["parameters"], rtol=1e-9)


def test_qlora_weights_are_nf4_blocks_plus_16bit_embeddings_and_adapters() -> None:
    result = estimate(one_gpu({"type": "qlora", "rank": 64}))
    model = validate_scenario(one_gpu({"type": "qlora"})).model
    adapters = result["training_method"]["trainable_parameters"]
    buffer = model.ffn_hidden_size * model.hidden_size * 2  # one dequantised matrix
    expected = (
        arithmetic.layer_parameters(model) * finetune.NF4_BITS / 8
        + arithmetic.embedding_parameters(model) * 2
        + adapters * 2
        + buffer
    )
    assert_allclose(result["memory_per_gpu_gib"]["weights"] * 2**30, expected, rtol=1e-9)
    # Adapters: 16-bit gradients and fp32 AdamW moments (12 B per adapter parameter).
    assert_allclose(result["memory_per_gpu_gib"]["gradients"] * 2**30, 2 * adapters, rtol=1e-9)
    assert_allclose(result["memory_per_gpu_gib"]["optimizer"] * 2**30, 8 * adapters, rtol=1e-9)


@pytest.mark.parametrize(
    ("optimizer", "states"),
    [("adamw", 8.0), ("adamw8bit", 2.0), ("adafactor", 0.0), ("sgd", 4.0), ("lion", 4.0)],
)
def test_optimizer_state_per_parameter(optimizer: str, states: float) -> None:
    # Mixed precision keeps an fp32 master copy (4 B) beside the optimizer's own state:
    # Adam m and v (8 B), 8-bit Adam (2 B, Dettmers et al. 2022), factored Adafactor (~0),
    # SGD momentum and Lion's single momentum (4 B).
    w, g, o = finetune.state_bytes("bf16", optimizer, adapters=False)
    assert (w, g) == (2.0, 2.0)
    assert o == pytest.approx(4.0 + states, abs=0.01)
    result = estimate(scenario(node({"type": "full"}, optimizer=optimizer), framework="deepspeed"))
    expected = (4.0 + states) * result["parameters"] / 8  # ZeRO-3 over 8 devices
    assert_allclose(result["memory_per_gpu_gib"]["optimizer"] * 2**30, expected, rtol=0.01)


def test_lora_flops_drop_the_frozen_weight_gradients() -> None:
    # A frozen matmul still needs its forward (2) and input gradient (2) but no weight
    # gradient: 4 FLOPs per weight per token instead of 6; adapters cost 6 per parameter.
    method = MethodConfig(type="lora", rank=16)
    full = arithmetic.model_flops_per_token(LLAMA2_7B)
    matmul = arithmetic.matmul_parameters_per_token(LLAMA2_7B)
    adapters = finetune.adapter_parameters(LLAMA2_7B, method)
    assert_allclose(
        finetune.training_flops_per_token(LLAMA2_7B, method),
        full - 2 * matmul + 6 * adapters,
        rtol=1e-12,
    )
    assert finetune.training_flops_per_token(LLAMA2_7B, finetune.FULL) == full


def test_frozen_bottom_layers_and_embeddings() -> None:
    n = 8
    frozen = MethodConfig(frozen_layers=n, frozen_embeddings=True)
    per_layer = arithmetic.layer_parameters(LLAMA2_7B) / LLAMA2_7B.num_layers
    trainable = finetune.trainable_parameters(LLAMA2_7B, frozen)
    embedding = LLAMA2_7B.vocab_size * LLAMA2_7B.hidden_size
    assert trainable == arithmetic.total_parameters(LLAMA2_7B) - n * per_layer - embedding
    # With the embedding frozen too, nothing below layer n trains: its layers run forward
    # only (2 FLOPs per weight), the others as in full training.
    full = arithmetic.model_flops_per_token(LLAMA2_7B)
    attention = arithmetic.attention_flops_per_token(LLAMA2_7B) / LLAMA2_7B.num_layers
    saved = n * (4 * per_layer + 2 * attention / 3)
    assert_allclose(finetune.training_flops_per_token(LLAMA2_7B, frozen), full - saved, rtol=1e-12)


def test_frozen_layers_cut_gradient_and_optimizer_memory_in_proportion() -> None:
    full = estimate(node({"type": "full"}))
    half = estimate(node({"type": "full", "frozen_layers": 16}))
    share = half["training_method"]["trainable_share"]
    assert 0.5 < share < 0.6  # half the layers; embeddings and head stay trained
    for part in ("gradients", "optimizer"):
        assert_allclose(
            half["memory_per_gpu_gib"][part], share * full["memory_per_gpu_gib"][part], rtol=1e-9
        )
    assert half["memory_per_gpu_gib"]["weights"] == full["memory_per_gpu_gib"]["weights"]


def test_lora_is_faster_than_full_finetuning_and_qlora_slower_than_lora() -> None:
    full = estimate(node({"type": "full"}))
    lora = estimate(node({"type": "lora", "rank": 16}))
    qlora = estimate(node({"type": "qlora", "rank": 16}))
    # The weight gradients are a third of the matmul work: LoRA's step is at most that
    # much shorter (the attention, the LM head's input gradient and the adapters remain).
    ratio = lora["step_time_s"] / full["step_time_s"]
    assert 2 / 3 < ratio < 1.0
    # QLoRA dequantises every base weight before each pass.
    assert qlora["step_time_s"] > lora["step_time_s"]
    assert qlora["memory_per_gpu_gib"]["weights"] < lora["memory_per_gpu_gib"]["weights"]
    # Only the adapters' gradients cross the network.
    assert (
        lora["time_per_step_breakdown_s"]["dp_communication"]
        < full["time_per_step_breakdown_s"]["dp_communication"]
    )


def test_optimizer_offload_reports_host_memory_per_node() -> None:
    data = node({"type": "full"}, offload="optimizer")
    result = estimate(data)
    assert result["memory_per_gpu_gib"]["optimizer"] == 0
    # ZeRO-Offload keeps the fp32 master copy and Adam moments on the host: 12 B per
    # parameter, here for the whole model on one node.
    assert_allclose(
        result["training_method"]["host_memory_per_node_gib"] * 2**30,
        12 * result["parameters"],
        rtol=1e-9,
    )
    on_device = estimate(node({"type": "full"}))
    assert on_device["training_method"]["host_memory_per_node_gib"] == 0
    assert result["step_time_s"] > on_device["step_time_s"]  # PCIe and the CPU optimizer


def test_host_memory_warning_when_offloaded_state_outgrows_a_node() -> None:
    data = copy.deepcopy(node({"type": "full"}, offload="optimizer_and_params"))
    data["model"] = GPT3_175B_MODEL
    result = estimate(data)
    assert result["training_method"]["host_memory_per_node_gib"] > 1024
    assert any("host memory per node" in w for w in result["warnings"])


def test_qlora_needs_a_framework_that_runs_it() -> None:
    assert validate_scenario(one_gpu({"type": "qlora"})).framework == "hf-peft"
    with pytest.raises(ScenarioError) as error:
        validate_scenario({**one_gpu({"type": "qlora"}), "framework": "megatron-lm"})
    assert error.value.key == "training.method"
    with pytest.raises(ScenarioError) as error:
        validate_scenario(
            scenario(node({"type": "full"}, optimizer="adamw8bit"), framework="megatron-lm")
        )
    assert error.value.key == "training.optimizer"


def test_auto_layout_for_lora_stays_within_the_profile() -> None:
    data = node({"type": "qlora", "rank": 16})
    data["parallelism"] = "auto"
    result = estimate(data)
    assert result["parallelism"]["tp"] == result["parallelism"]["pp"] == 1
    assert result["parallelism"]["recompute"] in ("none", "full")
    assert result["fits_in_memory"]


def test_method_round_trips_into_the_output() -> None:
    result = estimate(node({"type": "lora", "rank": 32, "targets": ["mlp"]}))
    method = result["training_method"]
    assert (method["type"], method["rank"], method["targets"]) == ("lora", 32, ["mlp"])
    assert method["description"] == "LoRA r=32 on mlp, AdamW"
    assert method["trainable_share"] == pytest.approx(
        method["trainable_parameters"] / result["parameters"]
    )


def test_single_projection_targets_match_peft() -> None:
    # PEFT's default LoRA for LLaMA: r = 8 on q_proj and v_proj, "trainable params:
    # 4,194,304" for a 7B model (alpaca-lora, PEFT examples).
    method = MethodConfig(type="lora", rank=8, targets=("q_proj", "v_proj"))
    assert finetune.adapter_parameters(LLAMA2_7B, method) == 4_194_304
    assert finetune.target_modules(("attention", "q_proj")) == finetune.LORA_GROUPS["attention"]


def test_lora_dropout_stores_a_copy_of_each_adapter_input() -> None:
    # With lora_dropout > 0 the adapter's A needs the dropped-out input for its gradient:
    # a 16-bit copy and a 1-byte mask per input value, beside the rank-r intermediate.
    plain = MethodConfig(type="lora", rank=8, targets=("q_proj", "v_proj"))
    dropped = MethodConfig(type="lora", rank=8, targets=("q_proj", "v_proj"), dropout=0.05)
    fixed, split = finetune.adapter_activation_bytes_per_token(LLAMA2_7B, plain, 2.0)
    assert (fixed, split) == (2 * 8 * 2.0, 0.0)
    fixed, split = finetune.adapter_activation_bytes_per_token(LLAMA2_7B, dropped, 2.0)
    assert fixed == 2 * (8 * 2.0 + 4096 * 3.0)
    down = MethodConfig(type="lora", rank=8, targets=("down_proj",), dropout=0.1)
    # The down projection is row-parallel: its input (the FFN width) splits over tp.
    assert finetune.adapter_activation_bytes_per_token(LLAMA2_7B, down, 2.0) == (16.0, 11008 * 3.0)


def test_pure_16bit_training_halves_model_state() -> None:
    # torchtune's and LLaMA-Factory's pure bf16: no fp32 master copy, 16-bit moments:
    # 2 + 2 + 4 = 8 B per parameter with AdamW, half of mixed precision's 16.
    assert finetune.state_bytes("bf16", "adamw", adapters=False, master_weights=False) == (
        2.0,
        2.0,
        4.0,
    )
    mixed = estimate(node({"type": "full"}))
    pure = estimate(node({"type": "full"}, master_weights=False))
    states = ("weights", "gradients", "optimizer")
    mixed_bytes = sum(mixed["memory_per_gpu_gib"][k] for k in states)
    pure_bytes = sum(pure["memory_per_gpu_gib"][k] for k in states)
    # ZeRO-3 over 8 devices keeps two layers of 16-bit weights unsharded in both cases.
    prefetch = pure["memory_per_gpu_gib"]["weights"] - 2 * pure["parameters"] / 8 / 2**30
    assert_allclose(pure_bytes - prefetch, (mixed_bytes - prefetch) / 2, rtol=1e-9)


@pytest.mark.parametrize(
    ("method", "training", "key"),
    [
        ({"type": "lora", "targets": ["gate_proj"]}, {}, "training.method.targets"),
        ({"type": "full", "dropout": 0.1}, {}, "training.method.dropout"),
        ({"type": "lora", "dropout": 1.5}, {}, "training.method.dropout"),
        ({"type": "full"}, {"master_weights": False, "precision": "fp32"},
         "training.master_weights"),
    ],
)  # fmt: skip
def test_bad_fine_tuning_keys_name_the_key(
    method: dict[str, Any], training: dict[str, Any], key: str
) -> None:
    data = node(method, **training)
    data["model"] = {**data["model"], "gated_mlp": "gate_proj" not in str(method)}
    with pytest.raises(ScenarioError) as error:
        validate_scenario(data)
    assert error.value.key == key
