"""Framework profiles: what each framework runs, validation against it, the search within it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from numpy.testing import assert_allclose

from estimator.core import ScenarioError, estimate, search, validate_scenario
from estimator.core.calibration import efficiency_for
from estimator.core.frameworks import PROFILES, profile_for
from estimator.core.layout import evaluate_layouts
from estimator.core.layout_arrays import Layouts
from estimator.core.search_grid import grid_axes
from estimator.core.workload import build_workload

from .scenarios import GPT3_175B, SMALL, scenario
from .test_cli import run

TPU = {"accelerator": "TPU-v5p", "num_gpus": 16}
GPT3_AUTO = scenario(GPT3_175B, parallelism="auto")
#: 8,192-token sequences: context parallelism up to 4 (2,048 tokens per rank at least).
GPT3_8K_AUTO = scenario(GPT3_AUTO, model={"seq_len": 8192})


def test_profiles_known_and_auto_defaults() -> None:
    assert set(PROFILES) == {
        "megatron-lm",
        "torchtitan",
        "deepspeed",
        "maxtext",
        "hf-peft",
        "nanotron",
        "megatron-lm-2021",
        "megatron-deepspeed-2022",
    }
    assert profile_for("auto", "google-tpu").id == "maxtext"
    for family in ("nvidia-hopper", "nvidia-ampere", "amd-cdna3", "intel-gaudi"):
        assert profile_for("auto", family).id == "megatron-lm"


def test_unknown_framework_names_the_key() -> None:
    with pytest.raises(ScenarioError) as caught:
        profile_for("jax", "nvidia-hopper")
    assert caught.value.key == "framework"


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        # DeepSpeed runs 1F1B pipelines only, no ring-attention CP, no fp8.
        (
            {
                "framework": "deepspeed",
                "parallelism": {"pipeline_schedule": "interleaved", "virtual_stages": 2},
            },
            "parallelism.pipeline_schedule",
        ),
        ({"framework": "deepspeed", "parallelism": {"cp": 2, "dp": 8}}, "parallelism.cp"),
        (
            {
                "framework": "deepspeed",
                "training": {"precision": "fp8"},
                "cluster": {"accelerator": "H100-SXM"},
            },
            "training.precision",
        ),
        # Megatron-LM: distributed optimizer (1) or FSDP (3), no ZeRO-2; explicit or "auto".
        ({"framework": "megatron-lm", "parallelism": {"zero_stage": 2}}, "parallelism.zero_stage"),
        # the 2021 stack has full recomputation only (selective came with Korthikanti 2022)
        ({"framework": "megatron-lm-2021",
          "parallelism": {"recompute": "selective", "zero_stage": 0}}, "parallelism.recompute"),
        # ... and no distributed optimizer (Megatron-LM added it in 2022)
        ({"framework": "megatron-lm-2021", "parallelism": {"recompute": "full"}},
         "parallelism.zero_stage"),
        ({"framework": "torchtitan", "parallelism": {"zero_stage": 1}}, "parallelism.zero_stage"),
        ({"framework": "torchtitan", "parallelism": {"zero_stage": 3},
          "training": {"offload": "optimizer"}}, "training.offload"),
        # TPUs run MaxText only; "auto" there is MaxText (FSDP = 3, no ZeRO-1).
        (
            {"framework": "megatron-lm", "cluster": {"accelerator": "TPU-v5p"},
             "parallelism": {"zero_stage": 3}},
            "framework",
        ),
        ({"cluster": {"accelerator": "TPU-v5p"}}, "parallelism.zero_stage"),
        ({"framework": "jax"}, "framework"),
        ({"framework": 3}, "framework"),
        ({"framework": ""}, "framework"),
    ],
)  # fmt: skip
def test_validation_rejects_what_the_framework_does_not_run(changes: dict, key: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        validate_scenario(scenario(GPT3_175B, **changes))
    assert caught.value.key == key
    assert caught.value.reason


@pytest.mark.parametrize(
    "changes",
    [
        {"framework": "maxtext", "cluster": {"accelerator": "TPU-v5p"},
         "parallelism": {"zero_stage": 3}},
        {"framework": "torchtitan", "parallelism": {"zero_stage": 2}},
        {"framework": "deepspeed", "parallelism": {"zero_stage": 2}},
        {"framework": "megatron-lm", "training": {"offload": "optimizer"}},
        # the layouts DeepSpeed refuses above are fine elsewhere
        {"framework": "megatron-lm", "parallelism": {"cp": 2, "dp": 8}},
        {"framework": "torchtitan", "training": {"precision": "fp8"},
         "cluster": {"accelerator": "H100-SXM"}, "parallelism": {"zero_stage": 3}},
        {"framework": "megatron-lm", "parallelism": {"pipeline_schedule": "interleaved",
                                                     "virtual_stages": 2}},
    ],
)  # fmt: skip
def test_validation_accepts_what_the_framework_runs(changes: dict) -> None:
    parsed = validate_scenario(scenario(GPT3_175B, **changes))
    assert parsed.framework == changes["framework"]


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({"framework": "deepspeed", "training": {"precision": "fp8"}}, "training.precision"),
    ],
)
def test_auto_layout_rejects_training_options_the_framework_lacks(changes: dict, key: str) -> None:
    # The search picks the layout, but fp8 or the offload mode is the scenario's own
    # choice: a framework that cannot run it cannot run any layout of the scenario, as
    # validation says for an explicit layout.
    with pytest.raises(ScenarioError) as caught:
        validate_scenario(scenario(SMALL, parallelism="auto", **changes))
    assert caught.value.key == key


def axes(data: dict) -> dict[str, list[int]]:
    return {name: [int(v) for v in values] for name, values in grid_axes(
        validate_scenario(data)).items()}  # fmt: skip


@pytest.mark.parametrize(
    ("framework", "zero_stages"),
    [("megatron-lm", [0, 1, 3]), ("torchtitan", [0, 2, 3]), ("deepspeed", [0, 1, 2, 3])],
)
def test_grid_axes_stay_within_the_profile(framework: str, zero_stages: list[int]) -> None:
    grid = axes(scenario(GPT3_8K_AUTO, framework=framework))
    assert grid["zero_stage"] == zero_stages
    if framework == "deepspeed":
        assert grid["virtual_stages"] == [1]
        assert grid["cp"] == [1]
    else:
        assert len(grid["virtual_stages"]) > 1
        assert grid["cp"] == [1, 2, 4]


def test_grid_axes_auto_on_gpus_is_megatron_and_on_tpus_maxtext() -> None:
    assert axes(GPT3_AUTO)["zero_stage"] == [0, 1, 3]
    tpu = axes(scenario(SMALL, cluster=TPU, parallelism="auto"))
    assert tpu["zero_stage"] == [0, 3]


def test_search_results_run_on_the_framework() -> None:
    found = search(scenario(GPT3_AUTO, framework="deepspeed"), top_k=5)
    assert found["results"]
    for result in found["results"]:
        layout = result["parallelism"]
        assert (layout["cp"], layout["virtual_stages"]) == (1, 1)
        assert layout["pipeline_schedule"] == "1f1b"
        assert result["framework"]["id"] == "deepspeed"
    found = search(scenario(GPT3_AUTO, framework="megatron-lm"), top_k=5)
    assert all(r["parallelism"]["zero_stage"] != 2 for r in found["results"])


def test_estimate_reports_the_framework() -> None:
    result = estimate(GPT3_175B)
    assert result["framework"] == PROFILES["megatron-lm"].as_dict()
    assert result["framework"]["supports"]["zero_stages"] == [0, 1, 3]
    tpu = estimate(scenario(SMALL, cluster=TPU, parallelism={"zero_stage": 3}))
    assert tpu["framework"]["id"] == "maxtext"
    assert tpu["memory_headroom"]["usable_gib"] == pytest.approx(95 * 0.95, rel=1e-12)
    json.dumps(result, allow_nan=False)


def test_deepspeed_has_no_tensor_parallel_overlap() -> None:
    # On H100s (a fitted TP overlap) DeepSpeed runs the step Megatron-LM would run with the
    # overlap switched off and without Megatron-Core's DDP (buckets scaled with the group,
    # per-chunk syncs): same profile otherwise (headroom, no compiler remat).
    h100 = scenario(GPT3_175B, cluster={"accelerator": "H100-SXM"})
    deepspeed = estimate(scenario(h100, framework="deepspeed"))
    megatron = estimate(h100)
    parsed = validate_scenario(h100)
    assert parsed.parallelism is not None
    family = efficiency_for(parsed.cluster.spec.family)
    assert family.tp_overlap > 0
    no_overlap = build_workload(parsed, efficiency=dataclasses.replace(family, tp_overlap=0.0))
    plain_ddp = dataclasses.replace(no_overlap.framework, mcore_ddp=False)
    no_overlap = dataclasses.replace(no_overlap, framework=plain_ddp)
    step = evaluate_layouts(no_overlap, Layouts.single(parsed.parallelism)).step_time[0]
    assert_allclose(deepspeed["step_time_s"], step, rtol=1e-12)
    parts_d = deepspeed["time_per_step_breakdown_s"]
    parts_m = megatron["time_per_step_breakdown_s"]
    assert parts_d["tp_communication"] > parts_m["tp_communication"]
    assert parts_d["compute"] == parts_m["compute"]
    assert deepspeed["memory_per_gpu_gib"] == megatron["memory_per_gpu_gib"]


@pytest.mark.parametrize(
    ("framework", "message"),
    [
        ("jax", "framework: must be one of"),
        ("megatron-lm", "framework: 'megatron-lm' does not run on TPUs"),
    ],
)
def test_cli_bad_framework_exits_2_naming_it(tmp_path: Path, framework: str, message: str) -> None:
    data: dict[str, Any] = scenario(SMALL, framework=framework)
    if framework == "megatron-lm":
        data = scenario(data, cluster=TPU, parallelism={"zero_stage": 3})
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    done = run("estimate", str(path))
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith(message)
    assert done.stderr.count("\n") == 1
    assert done.stderr.endswith("\n")


@pytest.mark.parametrize(
    ("changes", "resolved"),
    [
        ({"framework": "auto", "parallelism": {"zero_stage": 3}}, "megatron-lm"),
        ({"parallelism": {"zero_stage": 2}}, "torchtitan"),
        # GPT-3's stated ZeRO-1 rules torchtitan out; DeepSpeed runs both.
        ({"training": {"offload": "optimizer_and_params"}}, "deepspeed"),
        ({"training": {"offload": "optimizer_and_params"}, "parallelism": "auto"}, "torchtitan"),
        ({"cluster": {"accelerator": "TPU-v5p"}, "parallelism": {"zero_stage": 3}}, "maxtext"),
    ],
)
def test_auto_framework_resolves_to_the_first_profile_that_runs_the_scenario(
    changes: dict, resolved: str
) -> None:
    # A contract-valid scenario is never refused for a framework nobody named: "auto" is
    # the family's default when it runs the scenario, else the first profile that does.
    parsed = validate_scenario(scenario(GPT3_175B, **changes))
    assert parsed.framework == resolved
    assert estimate(scenario(GPT3_175B, **changes))["framework"]["id"] == resolved


# --- "auto" for fp16 on GPUs with bf16: the 2021 stack ------------------------------------

GPT3_FP16 = scenario(GPT3_175B, training={"precision": "fp16"})


@pytest.mark.parametrize(
    ("changes", "framework"),
    [
        ({}, "megatron-lm-2021"),
        ({"parallelism": "auto"}, "megatron-lm-2021"),
        # bf16 on the same GPU: today's stack
        ({"training": {"precision": "bf16"}}, "megatron-lm"),
        # V100 has no bf16: fp16 is what any stack trains in there
        ({"cluster": {"accelerator": "V100-32GB-SXM"}, "parallelism": "auto"}, "megatron-lm"),
        # ROCm stacks kept fp16 with FlashAttention (ORNL 2023): today's profile
        ({"cluster": {"accelerator": "MI250X", "num_gpus": 1024}}, "megatron-lm"),
        # the 2021 stack has no ZeRO: its sharded contemporaries (same kernels) run it
        ({"parallelism": {"zero_stage": 1}}, "megatron-deepspeed-2022"),
        ({"parallelism": {"zero_stage": 3}}, "megatron-deepspeed-2022"),
        # neither has selective recomputation (Korthikanti et al. 2022): today's profile
        ({"parallelism": {"recompute": "selective"}}, "megatron-lm"),
        # named: taken as named
        ({"framework": "megatron-lm"}, "megatron-lm"),
    ],
)
def test_auto_framework_for_fp16_on_a_bf16_gpu_is_the_2021_stack(
    changes: dict, framework: str
) -> None:
    layout = {**GPT3_FP16["parallelism"], "recompute": "full", "zero_stage": 0}
    base = dict(GPT3_FP16, parallelism=layout)
    assert validate_scenario(scenario(base, **changes)).framework == framework


def test_the_2021_stack_searches_without_selective_recompute_sp_or_cp() -> None:
    data = scenario(GPT3_FP16, parallelism="auto", model={"seq_len": 8192})
    grid = axes(data)
    assert grid["cp"] == [1]
    assert set(grid["recompute"]) == {0, 2}  # none, full
    found = search(data, top_k=5)
    assert found["results"]
    for row in found["results"]:
        assert any("FlashAttention" in note for note in row["warnings"])
        assert row["parallelism"]["sequence_parallel"] is False
        assert row["parallelism"]["recompute"] in ("none", "full")
        assert row["framework"]["id"] == "megatron-lm-2021"


def test_auto_falls_back_from_the_2021_stack_only_when_no_layout_fits_on_it() -> None:
    """OPT-175B's cluster (992 A100s, 31 x 32): with tp 8 at most and 96 layers, no pipeline
    of the 2021 stack (no ZeRO) fits the 175B states, so the search moves on to the sharded
    stack of the period (OPT ran FSDP), still without FlashAttention; GPT-3 on 1,024 GPUs
    fits on the 2021 stack and stays there."""
    opt = scenario(GPT3_FP16, parallelism="auto", training={"global_batch_size": 992},
                   cluster={"num_gpus": 992})  # fmt: skip
    parsed = validate_scenario(opt)
    assert parsed.framework == "megatron-lm-2021"
    assert parsed.framework_fallbacks[:2] == ("megatron-deepspeed-2022", "megatron-lm")
    legacy = search(dict(opt, framework="megatron-lm-2021"), top_k=1)
    assert legacy["results"] == []
    assert "no layout fits" in legacy["reason"]
    result = estimate(opt)
    assert result["framework"]["id"] == "megatron-deepspeed-2022"
    assert result["fits_in_memory"]
    # OPT's own layout (Zhang et al. 2022, section 2.3: FSDP with Megatron-LM tensor
    # parallelism 8, activation checkpointing): ZeRO-3 over the 124 nodes, one member each.
    layout = result["parallelism"]
    assert (layout["tp"], layout["pp"], layout["dp"]) == (8, 1, 124)
    assert layout["zero_stage"] == 3
    found = search(opt, top_k=3)
    assert {row["framework"]["id"] for row in found["results"]} == {"megatron-deepspeed-2022"}
    assert estimate(scenario(GPT3_FP16, parallelism="auto"))["framework"]["id"] == (
        "megatron-lm-2021"
    )


def test_the_2022_stack_moves_zero3_traffic_at_one_nic_per_device() -> None:
    """DeepSpeed ZeRO-3 over 384 A100s without model parallelism (Narayanan et al. 2021,
    table 2): eight members per node. On the 2022 stack its gathers and reduce-scatters move
    at one NIC per device instead of the node's eight, so (latency aside) the data-parallel
    time is eight times that of multi-rail rings; ZeRO-1 traffic is unchanged."""
    layout = {"tp": 1, "pp": 1, "dp": 384, "micro_batch_size": 4, "zero_stage": 3,
              "recompute": "full", "sequence_parallel": False}  # fmt: skip
    data = scenario(GPT3_FP16, cluster={"num_gpus": 384},
                    training={"global_batch_size": 1536}, parallelism=layout)  # fmt: skip
    parsed = validate_scenario(data)
    assert parsed.framework == "megatron-deepspeed-2022"
    stated_layout = parsed.parallelism
    assert stated_layout is not None
    family = efficiency_for(parsed.cluster.spec.family)
    no_latency = dataclasses.replace(family, intra_node_latency_s=0.0, inter_node_latency_s=0.0)
    one_nic = build_workload(parsed, efficiency=no_latency)
    rails = dataclasses.replace(
        one_nic, framework=dataclasses.replace(one_nic.framework, sharded_multi_rail=True)
    )

    def dp_time(workload: Any, zero_stage: int) -> float:
        stated = dataclasses.replace(stated_layout, zero_stage=zero_stage)
        return float(evaluate_layouts(workload, Layouts.single(stated)).dp_communication[0])

    assert_allclose(dp_time(one_nic, 3) / dp_time(rails, 3), 8.0, rtol=1e-9)
    assert_allclose(dp_time(one_nic, 1), dp_time(rails, 1), rtol=1e-12)


def test_only_a_period_stack_gives_way_when_nothing_fits() -> None:
    """Today's default reports that nothing fits rather than moving to another framework;
    a named framework and a stated layout never fall back."""
    today = validate_scenario(scenario(GPT3_175B, parallelism="auto"))
    assert today.framework == "megatron-lm"
    assert today.framework_fallbacks == ()
    named = validate_scenario(dict(scenario(GPT3_FP16, parallelism="auto"),
                                   framework="megatron-lm-2021"))  # fmt: skip
    assert named.framework_fallbacks == ()
    layout = {**GPT3_FP16["parallelism"], "recompute": "full", "zero_stage": 0}
    stated = validate_scenario(dict(GPT3_FP16, parallelism=layout))
    assert stated.framework == "megatron-lm-2021"
    assert stated.framework_fallbacks == ()


#: Narayanan et al. 2021 (arXiv 2104.04473), table 1: GPT 1.7B (24 layers, h 2304, 24 heads)
#: on 32 A100s at 137 TFLOP/s and GPT 1T (128 layers, h 25600, 160 heads) on 3,072 at 163,
#: both with full recomputation in fp16 (the paper's FLOPs per token count the recompute:
#: 96 l h^2 (1 + s/6h + V/16lh) per sequence token, batch 512 and 3,072).
NARAYANAN_T1 = [
    ({"num_layers": 24, "hidden_size": 2304, "num_attention_heads": 24}, 32,
     {"tp": 1, "pp": 1, "dp": 32}, 512, 137.0),
    ({"num_layers": 128, "hidden_size": 25600, "num_attention_heads": 160}, 3072,
     {"tp": 8, "pp": 64, "dp": 6}, 3072, 163.0),
]  # fmt: skip


def _paper_tokens_per_s(shape: dict, tflops: float) -> float:
    """Tokens/s per GPU from the paper's teraFLOP/s and its FLOPs per token (appendix:
    96 l h^2 (1 + s/6h + V/16lh), recompute forward included; s 2048, V 51200)."""
    h, layers, s, v = shape["hidden_size"], shape["num_layers"], 2048, 51200
    return tflops * 1e12 / (96 * layers * h**2 * (1 + s / (6 * h) + v / (16 * layers * h)))


def _paper_gpt(shape: dict, gpus: int, batch: int, layout: dict) -> dict[str, Any]:
    """One of the paper's fp16 GPTs on ``gpus`` 80 GB A100s, zero stage 0 and no sequence
    parallelism (the 2021 stack has neither) unless ``layout`` says otherwise."""
    layout = {"zero_stage": 0, "sequence_parallel": False, **layout}
    return scenario(GPT3_FP16, model=shape, training={"global_batch_size": batch},
                    cluster={"num_gpus": gpus}, parallelism=layout)  # fmt: skip


def _narayanan_ratio(framework: str | None, shape: dict, gpus: int, layout: dict,
                     batch: int, measured_tflops: float) -> float:  # fmt: skip
    data = _paper_gpt(shape, gpus, batch, {**layout, "micro_batch_size": 1, "recompute": "full"})
    if framework is not None:
        data["framework"] = framework
    measured = _paper_tokens_per_s(shape, measured_tflops)
    return float(estimate(data)["tokens_per_s_per_gpu"]) / measured


def test_unfused_attention_explains_why_small_models_ran_further_from_peak_in_2021() -> None:
    """The 1.7B model's attention is a far larger share of its step than the 1T model's:
    with the 2021 stack the two predictions err alike (within 12 % of each other), while
    FlashAttention would put the 1.7B model more than 20 % further above its measurement
    than the 1T model. The measurements are the paper's; the ratio holds whatever the
    fitted efficiencies."""
    small, large = NARAYANAN_T1
    legacy = _narayanan_ratio(None, *small) / _narayanan_ratio(None, *large)
    flash = _narayanan_ratio("megatron-lm", *small) / _narayanan_ratio("megatron-lm", *large)
    assert abs(legacy - 1.0) < 0.12
    assert flash > 1.2


def test_the_2021_stack_keeps_the_scores_and_dropout_masks_korthikanti_counts() -> None:
    """Korthikanti et al. 2022, table 2: without FlashAttention a layer keeps
    s b h (34 + 5 a s / h) bytes (no parallelism, no recomputation); today's profile keeps
    s b h 32 (no scores, no dropout masks). The difference per layer is s b (2 h + 5 a s)."""
    layout = {"tp": 1, "pp": 1, "dp": 1024, "micro_batch_size": 1, "zero_stage": 0,
              "recompute": "none", "sequence_parallel": False}  # fmt: skip
    small = scenario(GPT3_FP16, model={"num_layers": 4, "hidden_size": 2048,
                                       "num_attention_heads": 16}, parallelism=layout)  # fmt: skip
    legacy = estimate(small)
    today = estimate(scenario(small, framework="megatron-lm"))
    assert legacy["framework"]["id"] == "megatron-lm-2021"
    s, b, h, a, layers = 2048, 1, 2048, 16, 4
    expected = layers * s * b * (2 * h + 5 * a * s) / 2**30
    extra = legacy["memory_per_gpu_gib"]["activations"] - today["memory_per_gpu_gib"]["activations"]
    assert extra == pytest.approx(expected, rel=1e-9)


#: Narayanan et al. 2021, table 1 (teraFLOP/s per GPU, the paper's count with the recompute
#: forward), with the layouts and micro-batches of NVIDIA's scripts for that table
#: (NVIDIA/Megatron-LM examples/sc21/run_table_1.sh, every row with full recomputation;
#: interleaved rows give layers per virtual stage): (shape, GPUs, tp, pp, micro-batch,
#: layers per virtual stage, batch, measured teraFLOP/s).
SC21_TABLE_1 = [
    ((24, 2304, 24), 32, 1, 1, 16, None, 512, 137.0),
    ((30, 3072, 32), 64, 2, 1, 16, None, 512, 138.0),
    ((36, 4096, 32), 128, 4, 1, 16, None, 512, 142.0),
    ((40, 6144, 48), 256, 8, 1, 8, None, 1024, 135.0),
    ((48, 8192, 64), 512, 8, 2, 4, None, 1536, 138.0),
    ((60, 10240, 80), 1024, 8, 4, 2, 5, 1792, 140.0),
    ((80, 12288, 96), 1536, 8, 8, 2, 5, 2304, 148.0),
    ((96, 16384, 128), 1920, 8, 16, 1, 3, 2160, 155.0),
    ((105, 20480, 128), 2520, 8, 35, 1, 1, 2520, 163.0),
    ((128, 25600, 160), 3072, 8, 64, 1, None, 3072, 163.0),
]


@pytest.mark.parametrize("row", SC21_TABLE_1, ids=lambda row: f"{row[1]}gpus")
def test_the_published_2021_layouts_fit_the_stack_and_reach_their_throughput(row: tuple) -> None:
    """Every layout NVIDIA published for table 1 leaves the 2021 stack's headroom free (it
    ran), and the estimate at that layout is within 10 % of the paper's throughput (these
    rows sit at -5 % to +2 %, where the search's layouts without recomputation predict up
    to 39 % more than the paper measured)."""
    (layers, hidden, heads), gpus, tp, pp, micro, per_virtual, batch, tflops = row
    layout: dict[str, Any] = {"tp": tp, "pp": pp, "dp": gpus // (tp * pp),
                              "micro_batch_size": micro, "recompute": "full"}  # fmt: skip
    if per_virtual:
        virtual = layers // pp // per_virtual
        layout |= {"pipeline_schedule": "interleaved", "virtual_stages": virtual}
    shape = {"num_layers": layers, "hidden_size": hidden, "num_attention_heads": heads}
    result = estimate(_paper_gpt(shape, gpus, batch, layout))
    assert result["framework"]["id"] == "megatron-lm-2021"
    assert result["memory_headroom"]["headroom_gib"] >= 0.0
    measured = _paper_tokens_per_s(shape, tflops)
    assert float(result["tokens_per_s_per_gpu"]) == pytest.approx(measured, rel=0.10)


def _figure_17(batch: int, recompute: str) -> dict[str, Any]:
    """Narayanan et al. 2021, figure 17: a 145B GPT at (t, p) = (8, 16), micro-batch 1, on
    128 80 GB A100s (NVIDIA/Megatron-LM examples/sc21/run_figure_17.sh)."""
    shape = {"num_layers": 80, "hidden_size": 12288, "num_attention_heads": 96}
    layout = {"tp": 8, "pp": 16, "dp": 1, "micro_batch_size": 1, "recompute": recompute}
    return estimate(_paper_gpt(shape, 128, batch, layout))


def test_the_2021_stack_headroom_is_what_figure_17_ran_without_recomputation() -> None:
    """Section 5.6: without recomputation the 145B model ran only at small batch sizes, and
    recomputation at large ones was "up to 2x higher than the best throughput achieved
    without". With 1F1B the first stage holds min(p, m) micro-batches: the run at batch 8
    must be within the stack's headroom, the one at 16 (16 micro-batches held) not, and the
    best that fits must be about half the recomputed batch-256 throughput (1.7x to 2.3x)."""
    batches = (1, 2, 4, 8, 16, 32, 64, 128, 256)
    plain = {b: _figure_17(b, "none") for b in batches}
    fitting = [b for b in batches if plain[b]["memory_headroom"]["headroom_gib"] >= 0.0]
    assert fitting == [1, 2, 4, 8]
    best_plain = max(float(plain[b]["tokens_per_s"]) for b in fitting)
    recomputed = _figure_17(256, "full")
    assert recomputed["memory_headroom"]["headroom_gib"] >= 0.0
    assert 1.7 <= float(recomputed["tokens_per_s"]) / best_plain <= 2.3
    # Today's default headroom would have admitted batch 16 (1.4x): the finding needs 20 %.
    today = 1.0 - PROFILES["megatron-lm"].memory_headroom
    assert plain[16]["memory_headroom"]["used_fraction"] < today


@pytest.mark.parametrize(
    ("precision", "stated", "expected"),
    [
        ("fp16", None, False),  # the 2021 stack had no sequence parallelism
        ("fp16", True, True),  # a stated flag is taken as given
        ("bf16", None, True),  # the contract's default on today's stack: on with tp > 1
    ],
)
def test_omitted_sequence_parallel_follows_the_framework(
    precision: str, stated: bool | None, expected: bool
) -> None:
    layout = {**GPT3_FP16["parallelism"], "recompute": "full", "zero_stage": 0}
    if stated is not None:
        layout["sequence_parallel"] = stated
    else:
        layout.pop("sequence_parallel", None)
    data = scenario(dict(GPT3_FP16, parallelism=layout), training={"precision": precision})
    parsed = validate_scenario(data)
    assert parsed.parallelism is not None
    assert parsed.parallelism.tp > 1
    assert parsed.parallelism.sequence_parallel is expected
