"""The step-time margins, the whole run and the training method, shaped from real estimates
(no database)."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
from numpy.testing import assert_allclose

from estimator.core import estimate
from estimator.core.presets import recipe_scenario
from planner.common.labels import STEP_PARTS, WHOLE_RUN_PARTS
from planner.scenarios.breakdowns import (
    count_text,
    margin_lines,
    percent_text,
    share_text,
    step_parts,
    training_method,
    training_method_shown,
    training_summary,
    whole_run_table,
)
from tests.planner.conftest import small_spec


@cache
def _estimate(num_gpus: int = 64, capacity: str = "dedicated") -> dict[str, Any]:
    spec = small_spec("H100-SXM", num_gpus)
    spec["run"] = {"capacity": capacity}
    return estimate(spec)


def test_percent_text_keeps_one_decimal_and_drops_a_whole_one() -> None:
    assert [percent_text(x) for x in (0.1, 0.0571428, 0.0, 1.0)] == [
        "10 %", "5.7 %", "0 %", "100 %",
    ]  # fmt: skip


def test_margin_lines_split_the_overheads_into_the_two_margins() -> None:
    result = _estimate()
    breakdown, margins = result["time_per_step_breakdown_s"], result["margins_applied"]
    framework, jitter = margin_lines(breakdown, margins)
    assert (framework.key, jitter.key) == ("framework_overhead", "network_jitter")
    assert_allclose(framework.seconds + jitter.seconds, breakdown["overheads"], rtol=1e-9)
    stack = "" if margins["framework_overhead_scale"] == 1.0 else " on this software stack"
    assert framework.label == (
        f"Framework overhead ({percent_text(margins['framework_overhead'])}{stack})"
    )
    assert jitter.label == (
        f"Network jitter ({percent_text(margins['network_jitter'])} at this cluster size)"
    )
    assert jitter.stated is not None
    assert_allclose(jitter.stated * margins["network_jitter_scale"], margins["network_jitter"])
    assert jitter.scale_note == (
        f"{margins['network_jitter_scale']:.2f} times the stated {percent_text(jitter.stated)}"
    )
    if margins["framework_overhead_scale"] == 1.0:
        assert framework.scale_note is None
    else:  # the software stack's share of the stated margin
        assert framework.stated == pytest.approx(0.10, rel=1e-9)


def test_step_parts_still_add_up_to_the_step_time() -> None:
    result = _estimate()
    breakdown = result["time_per_step_breakdown_s"]
    parts = step_parts(breakdown, result["margins_applied"])
    keys = [key for key, _ in parts]
    assert "overheads" not in keys
    assert keys[-2:] == ["framework_overhead", "network_jitter"]
    assert_allclose(sum(breakdown[key] for key in keys), result["step_time_s"], rtol=1e-6)


def test_one_node_pays_no_network_jitter() -> None:
    result = _estimate(num_gpus=8)
    jitter = margin_lines(result["time_per_step_breakdown_s"], result["margins_applied"])[1]
    assert (jitter.seconds, jitter.label) == (0.0, "Network jitter (0 % at this cluster size)")
    assert jitter.scale_note is None  # no stated margin to derive from a zero scale


def test_whole_run_table_adds_up_to_the_estimates_training_time() -> None:
    result = _estimate()
    table = whole_run_table(result["whole_run"])
    assert table is not None
    assert_allclose(table.total.days, result["training_days"], rtol=1e-9)
    assert_allclose(table.total.gpu_hours, result["gpu_hours"], rtol=1e-9)
    assert_allclose(table.goodput, result["goodput"], rtol=1e-9)
    assert_allclose(sum(line.share for line in table.rows), 1.0, rtol=1e-9)
    assert table.rows[0].label == "Steady-state training"
    # dedicated capacity is never preempted, so that line of zeros is left out
    assert [line.label for line in table.parts] == [
        label for key, label in WHOLE_RUN_PARTS if key != "preemptions"
    ]


def test_whole_run_table_shows_preemptions_on_spot_capacity() -> None:
    result = _estimate(capacity="spot")
    table = whole_run_table(result["whole_run"])
    assert table is not None
    assert table.capacity == "spot"
    preemptions = next(line for line in table.parts if line.key == "preemptions")
    assert preemptions.label == "Spot preemptions"
    assert preemptions.days == pytest.approx(result["whole_run"]["parts_days"]["preemptions"])
    assert preemptions.days > 0
    assert_allclose(table.total.days, result["training_days"], rtol=1e-9)


def test_an_estimate_from_before_the_split_keeps_the_old_lines() -> None:
    result = _estimate()
    breakdown = {
        key: value
        for key, value in result["time_per_step_breakdown_s"].items()
        if key not in ("framework_overhead", "network_jitter")
    }
    assert margin_lines(breakdown, None) == []
    assert step_parts(breakdown, None) == STEP_PARTS
    assert whole_run_table(None) is None


# --- Training method -------------------------------------------------------------------------


def test_count_text_and_share_text_keep_small_figures_readable() -> None:
    assert [count_text(x) for x in (41943040.0, 8.03e9, 1.68e8, 950.0)] == [
        "41.9 M", "8.03 B", "168 M", "950",
    ]  # fmt: skip
    assert [share_text(x) for x in (0.005223, 0.0206, 0.717, 1.0)] == [
        "0.52 %", "2.1 %", "71.7 %", "100 %",
    ]  # fmt: skip


def test_training_method_of_a_lora_estimate() -> None:
    result = estimate(recipe_scenario("llama3-8b-lora-r16-8xh100"))
    method = training_method(result["training_method"])
    assert method is not None
    assert (method.label, method.optimizer_label) == ("LoRA r=16 on attention and MLP", "AdamW")
    assert method.trainable_count == round(result["training_method"]["trainable_parameters"])
    assert method.trainable_text == "41.9 M (0.52 %)"
    assert not method.plain
    assert training_method_shown(result["training_method"]) == method


def test_training_method_of_a_qlora_estimate_names_its_4_bit_weights() -> None:
    result = estimate(recipe_scenario("llama3-8b-qlora-r64-1xl40s"))
    method = training_method(result["training_method"])
    assert method is not None
    assert method.label == "QLoRA r=64 on attention and MLP over 4-bit NF4 weights"


def test_training_method_of_frozen_layers_with_offload() -> None:
    spec = small_spec("H100-SXM", 8)
    spec["training"].update(
        method={"type": "full", "frozen_layers": 8, "frozen_embeddings": True},
        optimizer="adamw8bit", offload="optimizer",
    )  # fmt: skip
    reported = estimate(spec)["training_method"]
    method = training_method(reported)
    assert method is not None
    assert method.label == "Full training, the bottom 8 layers and the embeddings frozen"
    assert method.summary == (
        "Full training, the bottom 8 layers and the embeddings frozen · 8-bit AdamW · "
        "offload optimizer states to CPU"
    )
    assert method.offloads
    assert method.host_memory_per_node_gib == reported["host_memory_per_node_gib"] > 0


def test_plain_full_training_is_not_shown() -> None:
    reported = _estimate()["training_method"]
    method = training_method(reported)
    assert method is not None
    assert method.plain
    assert method.trainable_text == f"{count_text(_estimate()['parameters'])} (100 %)"
    assert training_method_shown(reported) is None


def test_an_estimate_made_before_the_training_method_has_none() -> None:
    assert training_method(None) is None
    assert training_method({}) is None
    assert training_method_shown(None) is None


def test_training_summary_reads_the_scenario_at_the_contract_defaults() -> None:
    assert (
        training_summary({"method": {"type": "lora"}}) == "LoRA r=16 on attention and MLP · AdamW"
    )
    qlora = {"method": {"type": "qlora", "rank": 64, "targets": ["q_proj", "v_proj"]},
             "optimizer": "adamw8bit"}  # fmt: skip
    assert training_summary(qlora) == (
        "QLoRA r=64 on q_proj and v_proj over 4-bit NF4 weights · 8-bit AdamW"
    )
    assert training_summary({"offload": "optimizer"}) == (
        "Full training · AdamW · offload optimizer states to CPU"
    )
    assert training_summary({"tokens": 1e9, "method": {"type": "full"}}) == ""
