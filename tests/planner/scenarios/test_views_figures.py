"""A run's figures on the run and scenario pages: the whole run by part, the two step-time
margins apart, the memory headroom under the framework, the layouts the search weighed, and
the training method of a fine-tuning run.

Runs are real: started with ``run_start`` and executed by the worker's service, so the
figures are the estimator's own output. One test strips the newer keys from such a run to
stand for a run stored before the estimator reported them.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils.html import escape
from numpy.testing import assert_allclose

from estimator.core.presets import recipe_scenario
from planner.scenarios.breakdowns import percent_text
from planner.scenarios.models import EstimationRun, Project
from planner.scenarios.services import scenario_create
from planner.scenarios.views.figures import layout_compact, layouts_considered, run_figures
from tests.planner.conftest import Capture, _client, _finished_run, list_price, small_spec

pytestmark = pytest.mark.django_db

#: What the estimator added to its output with the whole run, the frameworks and the search's
#: runners-up; a run stored before then has none of them.
NEW_KEYS = (
    "whole_run",
    "margins_applied",
    "framework",
    "software_stack",
    "memory_headroom",
    "alternatives",
)


def _result(run: EstimationRun) -> dict[str, Any]:
    assert run.result is not None
    return run.result


def _figures(run: EstimationRun) -> dict[str, Any]:
    figures = run_figures(run)
    assert figures is not None
    return figures


def _page(user: User, run: EstimationRun) -> str:
    response = _client(user).get(run.get_absolute_url())
    assert response.status_code == 200
    return response.content.decode()


# --- Layout text -----------------------------------------------------------------------------


def test_layout_compact_names_sizes_zero_recompute_and_schedule() -> None:
    layout = {"tp": 4, "pp": 4, "dp": 128, "cp": 1, "ep": 1, "micro_batch_size": 1,
              "zero_stage": 1, "recompute": "none", "pipeline_schedule": "interleaved",
              "virtual_stages": 5}  # fmt: skip
    assert (
        layout_compact(layout) == "tp4 pp4 dp128 cp1 · mb1 · ZeRO-1 · no recompute · interleaved v5"
    )
    flat = layout | {"pp": 1, "ep": 8, "recompute": "full", "pipeline_schedule": "1f1b"}
    assert layout_compact(flat) == "tp4 pp1 dp128 cp1 ep8 · mb1 · ZeRO-1 · full recompute"


# --- The figures -----------------------------------------------------------------------------


def test_the_whole_run_adds_up_to_the_estimates_training_time(estimated: EstimationRun) -> None:
    result, figures = _result(estimated), _figures(estimated)
    table = figures["whole_run"]
    assert_allclose(table.steady.days, result["whole_run"]["steady_state_days"])
    assert_allclose(table.total.days, result["training_days"], rtol=1e-9)
    assert_allclose(table.total.gpu_hours, result["gpu_hours"], rtol=1e-9)
    assert [line.label for line in table.parts] == [
        "Checkpoint writes",
        "Failures and restarts",
        "Evaluation",
        "Ramp-up",
        "Stragglers",
        "Allocation idle",
    ]  # fmt: skip  (dedicated capacity: no spot preemptions)


def test_the_step_time_shows_the_two_margins_as_separate_lines(estimated: EstimationRun) -> None:
    result, figures = _result(estimated), _figures(estimated)
    margins = result["margins_applied"]
    labels = {part["key"]: part["label"] for part in figures["step"]}
    assert "overheads" not in labels
    # The pooled stack pays its share of the stated 10 % (1 over its factor).
    share, scale = margins["framework_overhead"], margins["framework_overhead_scale"]
    assert share == pytest.approx(0.10 * scale, rel=1e-12)
    stack = "" if scale == 1.0 else " on this software stack"
    assert labels["framework_overhead"] == f"Framework overhead ({percent_text(share)}{stack})"
    assert labels["network_jitter"] == (
        f"Network jitter ({percent_text(margins['network_jitter'])} at this cluster size)"
    )
    total = sum(part["value"] for part in figures["step"])
    assert_allclose(total, result["step_time_s"], rtol=1e-6)


def test_the_memory_headroom_is_the_frameworks(estimated: EstimationRun) -> None:
    result, figures = _result(estimated), _figures(estimated)
    headroom = figures["headroom"]
    assert figures["framework"] == result["framework"]["name"]
    assert headroom["usable_gib"] == result["memory_headroom"]["usable_gib"]
    assert headroom["reserve"] == percent_text(result["framework"]["memory_headroom"])
    assert_allclose(
        headroom["left_gib"], headroom["usable_gib"] - result["memory_per_gpu_gib"]["total"],
        atol=1e-6,
    )  # fmt: skip
    assert headroom["over_gib"] is None  # the chosen layout fits


def test_the_layouts_considered_put_the_chosen_one_first(estimated: EstimationRun) -> None:
    result = _result(estimated)
    rows = layouts_considered(result)
    assert len(rows) == 1 + len(result["alternatives"]) > 1
    assert rows[0]["chosen"] is True
    assert rows[0]["layout"] == layout_compact(result["parallelism"])
    assert rows[0]["days"] == result["training_days"]
    for row, alternative in zip(rows[1:], result["alternatives"], strict=True):
        assert row["layout"] == layout_compact(alternative["parallelism"])
        assert (row["days"], row["why"]) == (alternative["training_days"], alternative["why"])
        assert row["mfu_percent"] == pytest.approx(100 * alternative["mfu"])


def test_a_fixed_layout_has_no_layouts_considered(
    requester: User, project: Project, prices: None, django_capture_on_commit_callbacks: Capture
) -> None:
    spec = small_spec("H100-SXM", 64)
    spec["parallelism"] = {"tp": 2, "pp": 1, "dp": 32, "micro_batch_size": 1, "zero_stage": 1,
                           "recompute": "selective"}  # fmt: skip
    fixed = scenario_create(
        user=requester, project=project, name="Fixed layout", spec=spec,
        price_source="price_entry", price=list_price("H100-SXM"),
    )  # fmt: skip
    run = _finished_run(django_capture_on_commit_callbacks, requester, fixed)
    assert "alternatives" not in _result(run)
    assert _figures(run)["layouts_considered"] == []
    assert 'data-testid="layouts-considered"' not in _page(requester, run)


# --- The pages -------------------------------------------------------------------------------


def test_the_run_page_shows_the_whole_run_margins_headroom_and_layouts(
    requester: User, estimated: EstimationRun
) -> None:
    result = _result(estimated)
    body = _page(requester, estimated)
    for shown in (
        'data-testid="whole-run"',
        "Steady-state training",
        "Allocation idle",
        f"{result['training_days']:.2f}",
        f"Framework overhead ({percent_text(result['margins_applied']['framework_overhead'])}",
        'data-testid="software-stack"',
        escape(result["software_stack"]["name"]),
        "The same layout on",  # the worker adds the other stacks' speeds
        f"Network jitter ({percent_text(result['margins_applied']['network_jitter'])}",
        'data-testid="memory-headroom"',
        f"Usable under {result['framework']['name']}",
        f"{result['memory_headroom']['headroom_gib']:.2f} GiB",
        'data-testid="layouts-considered"',
        layout_compact(result["parallelism"]),
        *(escape(alternative["why"]) for alternative in result["alternatives"]),
    ):
        assert shown in body, shown
    assert "Spot preemptions" not in body  # dedicated capacity
    assert "Framework overheads" not in body  # the lumped line is gone


def test_the_scenario_page_shows_the_same_figures(
    requester: User, estimated: EstimationRun
) -> None:
    response = _client(requester).get(estimated.scenario.get_absolute_url())
    body = response.content.decode()
    assert 'data-testid="whole-run"' in body
    assert 'data-testid="layouts-considered"' in body


def test_a_run_stored_before_the_new_figures_still_renders(
    requester: User, estimated: EstimationRun
) -> None:
    result = {key: value for key, value in _result(estimated).items() if key not in NEW_KEYS}
    breakdown = result["time_per_step_breakdown_s"]
    for key in ("framework_overhead", "network_jitter"):
        breakdown.pop(key)
    EstimationRun.objects.filter(pk=estimated.pk).update(result=result)
    estimated.refresh_from_db()
    figures = _figures(estimated)
    assert (figures["whole_run"], figures["headroom"], figures["framework"]) == (None, None, None)
    assert figures["software_stack"] is None
    assert (figures["margins"], figures["layouts_considered"]) == ([], [])
    body = _page(requester, estimated)
    assert 'data-testid="step-breakdown"' in body
    assert "Framework overheads" in body  # the one line such a run has
    for absent in ("whole-run", "memory-headroom", "layouts-considered", "step-margins"):
        assert f'data-testid="{absent}"' not in body, absent


# --- Training method -------------------------------------------------------------------------


def test_a_lora_run_shows_its_training_method(
    requester: User, project: Project, prices: None, django_capture_on_commit_callbacks: Capture
) -> None:
    lora = scenario_create(
        user=requester, project=project, name="LoRA r16", price_source="price_entry",
        spec=recipe_scenario("llama3-8b-lora-r16-8xh100"), price=list_price("H100-SXM"),
        model_preset="llama3-8b",
    )  # fmt: skip
    run = _finished_run(django_capture_on_commit_callbacks, requester, lora)
    reported = _result(run)["training_method"]
    method = _figures(run)["training_method"]
    assert method is not None
    assert method.trainable_count == round(reported["trainable_parameters"])
    body = _page(requester, run)
    for shown in (
        'data-testid="training-method" data-method="lora"',
        "LoRA r=16 on attention and MLP",
        f'data-testid="trainable-parameters" data-value="{method.trainable_count}"',
        method.trainable_text,
    ):
        assert shown in body, shown
    assert 'data-testid="host-memory"' not in body  # nothing offloaded
    assert (
        'data-testid="training-method"'
        in _client(requester).get(lora.get_absolute_url()).content.decode()
    )


def test_a_pre_training_run_has_no_training_method_block(
    requester: User, estimated: EstimationRun
) -> None:
    assert _result(estimated)["training_method"]["type"] == "full"
    assert _figures(estimated)["training_method"] is None
    assert 'data-testid="training-method"' not in _page(requester, estimated)
