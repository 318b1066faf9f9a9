"""compare.explain: how much slower one layout is, part by part, per token."""

from __future__ import annotations

from typing import Any

import pytest
from numpy.testing import assert_allclose

from estimator.core import estimate, search
from estimator.core.compare import NEGLIGIBLE, PARTS, alternatives, explain, with_comparisons

from .scenarios import GPT3_175B, LLAMA3_405B, SMALL, scenario

TPU_FSDP = scenario(
    SMALL,
    cluster={"accelerator": "TPU-v5p", "num_gpus": 16},
    parallelism={"tp": 4, "pp": 1, "dp": 4, "zero_stage": 3, "recompute": "full"},
)
MOE = scenario(
    SMALL,
    model={"moe": {"num_experts": 8, "top_k": 2, "expert_ffn_hidden_size": 4096}},
    parallelism={"ep": 2},
)
ESTIMATES = {
    "small": SMALL,
    "gpt3": GPT3_175B,
    "llama3-interleaved": LLAMA3_405B,
    "tpu-fsdp-full-recompute": TPU_FSDP,
    "moe": MOE,
    "gpt3-zero3": scenario(GPT3_175B, parallelism={"zero_stage": 3, "recompute": "full"}),
}


@pytest.fixture(scope="module")
def results() -> dict[str, dict[str, Any]]:
    return {name: estimate(data) for name, data in ESTIMATES.items()}


@pytest.mark.parametrize("name", ESTIMATES)
def test_parts_add_up_to_the_step(results: dict[str, dict[str, Any]], name: str) -> None:
    # compute + recompute + tp_communication + pp_bubble + exposed_communication +
    # overheads is the step (dp_communication is gross traffic, not a part of it).
    result = results[name]
    parts = result["time_per_step_breakdown_s"]
    assert_allclose(sum(parts[k] for k in PARTS), result["step_time_s"], rtol=1e-12)
    assert set(PARTS) == {
        "compute", "recompute", "tp_communication", "pp_bubble", "exposed_communication",
        "overheads",
    }  # fmt: skip


def per_token(result: dict[str, Any]) -> float:
    return float(result["step_time_s"]) / float(result["tokens_per_step"])


PAIRS = [
    ("gpt3", "gpt3-zero3"),
    ("gpt3-zero3", "gpt3"),  # faster "other": slower_by < 0, the parts say so too
    ("small", "moe"),
    ("small", "tpu-fsdp-full-recompute"),
]


@pytest.mark.parametrize(("best", "other"), PAIRS)
def test_explain_slower_by_is_the_per_token_time_ratio(
    results: dict[str, dict[str, Any]], best: str, other: str
) -> None:
    a, b = results[best], results[other]
    verdict = explain(a, b)
    assert_allclose(verdict["slower_by"], per_token(b) / per_token(a) - 1, rtol=1e-12)
    # Every part's growth per token, as a share of the better layout's time per token,
    # sums to slower_by: the parts add up to the step on both sides.
    shares = {
        k: (
            b["time_per_step_breakdown_s"][k] / b["tokens_per_step"]
            - a["time_per_step_breakdown_s"][k] / a["tokens_per_step"]
        )
        / per_token(a)
        for k in PARTS
    }
    assert_allclose(sum(shares.values()), verdict["slower_by"], rtol=0, atol=1e-9)
    # Reasons: the parts that grew by more than NEGLIGIBLE, largest first, with their share.
    named = [r["part"] for r in verdict["reasons"]]
    expected = sorted((k for k in PARTS if shares[k] > NEGLIGIBLE), key=lambda k: -shares[k])
    assert named == expected
    for reason in verdict["reasons"]:
        assert_allclose(reason["share"], shares[reason["part"]], rtol=1e-12)
        assert reason["label"] == PARTS[reason["part"]]
    assert verdict["why"].startswith(f"{verdict['slower_by']:.1%} slower per token")


def test_explain_against_itself_is_zero(results: dict[str, dict[str, Any]]) -> None:
    verdict = explain(results["gpt3"], results["gpt3"])
    assert verdict["slower_by"] == 0.0
    assert verdict["reasons"] == []


def test_explain_names_the_part_that_grew() -> None:
    # Full recomputation adds one forward pass per micro-batch: "recompute" must be the
    # first reason, and the extra memory of the faster layout is not claimed.
    fast = estimate(scenario(GPT3_175B, parallelism={"recompute": "selective"}))
    slow = estimate(scenario(GPT3_175B, parallelism={"recompute": "full"}))
    verdict = explain(fast, slow)
    assert verdict["slower_by"] > 0
    assert verdict["reasons"][0]["part"] == "recompute"
    assert "activation recomputation" in verdict["why"]
    assert "more per device" not in verdict["why"]  # full recompute needs less memory
    reverse = explain(slow, fast)
    assert "more per device" in reverse["why"]


def test_search_results_after_the_first_carry_comparison() -> None:
    found = search(scenario(GPT3_175B, parallelism="auto"), top_k=4)
    first, *rest = found["results"]
    assert "comparison" not in first
    assert rest
    for other in rest:
        assert other["comparison"] == explain(first, other)
        assert other["comparison"]["slower_by"] >= 0


def test_with_comparisons_and_alternatives_on_real_estimates(
    results: dict[str, dict[str, Any]],
) -> None:
    best = results["gpt3"]
    same_shape = estimate(scenario(GPT3_175B, parallelism={"micro_batch_size": 2}))
    others = [results["gpt3-zero3"], same_shape, results["gpt3-zero3"]]
    runners = alternatives(best, others, 3)
    # the micro-batch-only variant and the repeated shape are skipped
    assert [r["parallelism"] for r in runners] == [results["gpt3-zero3"]["parallelism"]]
    assert runners[0]["slower_by"] == explain(best, results["gpt3-zero3"])["slower_by"]
    assert runners[0]["memory_total_gib"] == results["gpt3-zero3"]["memory_per_gpu_gib"]["total"]
    listed = with_comparisons([dict(best), dict(results["gpt3-zero3"])])
    assert "comparison" not in listed[0]
    assert listed[1]["comparison"]["slower_by"] == runners[0]["slower_by"]
