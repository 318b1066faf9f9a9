"""The step-time margins and the whole run, shaped from real estimates (no database)."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
from numpy.testing import assert_allclose

from estimator.core import estimate
from planner.breakdowns import (
    margin_lines,
    percent_text,
    step_parts,
    whole_run_table,
)
from planner.labels import STEP_PARTS, WHOLE_RUN_PARTS
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
    assert framework.label == f"Framework overhead ({percent_text(margins['framework_overhead'])})"
    assert jitter.label == (
        f"Network jitter ({percent_text(margins['network_jitter'])} at this cluster size)"
    )
    assert jitter.stated is not None
    assert_allclose(jitter.stated * margins["network_jitter_scale"], margins["network_jitter"])
    assert jitter.scale_note == (
        f"{margins['network_jitter_scale']:.2f} times the stated {percent_text(jitter.stated)}"
    )
    assert framework.scale_note is None


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
