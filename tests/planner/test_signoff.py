"""The sign-off pack's whole run, step margins and training method: every run of the request,
side by side in the documents and long-form in the CSV and XLSX, all read from the snapshot.

The runs are real (started and executed by the worker's service). One test strips the newer
figures from a frozen snapshot to stand for a request submitted before they existed.
"""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.template.loader import render_to_string
from numpy.testing import assert_allclose

from estimator.core.presets import recipe_scenario
from planner.breakdowns import percent_text
from planner.models import BudgetRequest, EstimationRun, Project, Scenario
from planner.services import (
    budget_request_create,
    budget_request_submit,
    run_execute,
    run_start,
    scenario_create,
)
from planner.signoff import (
    MARGINS_HEADER,
    TRAINING_METHOD_HEADER,
    WHOLE_RUN_HEADER,
    signoff_context,
    signoff_csv,
    signoff_xlsx,
)
from tests.planner.conftest import list_price, small_spec
from tests.planner.views.conftest import _client

pytestmark = pytest.mark.django_db


@pytest.fixture
def runs(
    scenario: Scenario, requester: User, django_capture_on_commit_callbacks: Any
) -> list[EstimationRun]:
    """H100 on 64 (the scenario) and on 128 GPUs, both at the list price, both finished."""
    bigger = scenario_create(
        user=requester,
        project=scenario.project,
        name="H100 on 128",
        spec=small_spec("H100-SXM", 128),
        price_source="price_entry",
        price=list_price("H100-SXM"),
    )
    finished = []
    with django_capture_on_commit_callbacks(execute=False):
        for each in (scenario, bigger):
            done = run_execute(run_id=run_start(user=requester, scenario=each, seed=5).pk)
            assert done is not None
            assert done.status == "succeeded", done.error
            finished.append(done)
    return finished


@pytest.fixture
def submitted(runs: list[EstimationRun], requester: User) -> BudgetRequest:
    draft = budget_request_create(
        user=requester, run=runs[0], title="Llama 3 8B on 64 H100", justification="On plan.",
        alternatives=runs[1:],
    )  # fmt: skip
    return budget_request_submit(user=requester, request=draft)


def _result(run: EstimationRun) -> dict[str, Any]:
    assert run.result is not None
    return run.result


def _sections(text: str) -> dict[tuple[str, ...], list[list[str]]]:
    """The CSV's blocks after the summary (blank-line separated), by their header row."""
    blocks = [list(csv.reader(io.StringIO(b))) for b in text.strip().split("\r\n\r\n")[1:]]
    return {tuple(block[0]): block[1:] for block in blocks}


def test_every_run_has_its_whole_run_and_margins_side_by_side(
    submitted: BudgetRequest, runs: list[EstimationRun]
) -> None:
    context = signoff_context(submitted)
    assert [d["run"]["run"] for d in context["run_details"]] == [run.pk for run in runs]
    table = context["whole_run"]
    assert table["rows"][0]["label"] == "Steady-state training"
    assert "Spot preemptions" not in [row["label"] for row in table["rows"]]  # dedicated
    for total, run in zip(table["totals"], runs, strict=True):
        assert_allclose(total.days, _result(run)["training_days"], rtol=1e-9)
        assert_allclose(total.gpu_hours, _result(run)["gpu_hours"], rtol=1e-9)
    framework, jitter = table["margins"]
    assert (framework["name"], jitter["name"]) == ("Framework overhead", "Network jitter")
    for cell, run in zip(jitter["cells"], runs, strict=True):
        margins = _result(run)["margins_applied"]
        assert cell.share_text == percent_text(margins["network_jitter"])
        assert cell.seconds == _result(run)["time_per_step_breakdown_s"]["network_jitter"]


def test_the_csv_lists_each_runs_parts_and_margins(
    submitted: BudgetRequest, runs: list[EstimationRun]
) -> None:
    sections = _sections(signoff_csv(submitted))
    whole_run, margins = sections[WHOLE_RUN_HEADER], sections[MARGINS_HEADER]
    for run in runs:
        result = _result(run)
        lines = {row[2]: row for row in whole_run if row[1] == str(run.pk)}
        labels = list(lines)
        assert (labels[0], labels[-1]) == ("Steady-state training", "Total")
        assert float(lines["Total"][3]) == pytest.approx(result["training_days"], rel=1e-9)
        assert float(lines["Allocation idle"][4]) == pytest.approx(
            result["whole_run"]["parts_gpu_hours"]["allocation_idle"]
        )
        shares = {row[2]: float(row[3]) for row in margins if row[1] == str(run.pk)}
        assert shares == pytest.approx(
            {
                "Framework overhead": result["margins_applied"]["framework_overhead"],
                "Network jitter": result["margins_applied"]["network_jitter"],
            }
        )


def test_the_xlsx_has_a_sheet_for_the_whole_run_and_one_for_the_margins(
    submitted: BudgetRequest, runs: list[EstimationRun]
) -> None:
    from openpyxl import load_workbook

    book = load_workbook(io.BytesIO(signoff_xlsx(submitted)))
    assert book.sheetnames == ["Summary", "Comparison", "Whole run", "Step margins", "Timeline"]
    whole_run = list(book["Whole run"].iter_rows(values_only=True))
    assert whole_run[0] == WHOLE_RUN_HEADER
    totals = [row for row in whole_run[1:] if row[2] == "Total"]
    assert [row[1] for row in totals] == [run.pk for run in runs]
    for row, run in zip(totals, runs, strict=True):
        assert row[3] == pytest.approx(_result(run)["training_days"], rel=1e-9)
        assert row[5] == pytest.approx(1.0)
    margins = list(book["Step margins"].iter_rows(values_only=True))
    assert margins[0] == MARGINS_HEADER
    assert len(margins) == 1 + 2 * len(runs)


def test_a_snapshot_frozen_before_the_whole_run_still_makes_a_pack(
    submitted: BudgetRequest, runs: list[EstimationRun]
) -> None:
    snapshot = submitted.snapshot or {}
    for summary in (snapshot["chosen"], *snapshot["alternatives"]):
        del summary["whole_run"], summary["margins_applied"]
    BudgetRequest.objects.filter(pk=submitted.pk).update(snapshot=snapshot)
    old = BudgetRequest.objects.get(pk=submitted.pk)
    context = signoff_context(old)
    # The chosen run's full estimate is in every snapshot; the alternatives' is not.
    chosen, alternative = context["whole_run"]["totals"]
    assert chosen is not None
    assert_allclose(chosen.days, _result(runs[0])["training_days"], rtol=1e-9)
    assert alternative is None
    jitter = context["whole_run"]["margins"][1]["cells"]
    assert jitter[0].share_text  # the chosen run's margins come from its full estimate
    assert jitter[1].share is None  # an alternative's seconds are known, its share not
    csv_text = signoff_csv(old)
    assert "Steady-state training" in csv_text
    assert signoff_xlsx(old)


# --- Training method -------------------------------------------------------------------------


@pytest.fixture
def fine_tuning(
    project: Project, requester: User, prices: None, django_capture_on_commit_callbacks: Any
) -> BudgetRequest:
    """A submitted request for a LoRA run of Llama 3 8B, a full fine-tune as the alternative."""
    runs = []
    for name, recipe in (("LoRA r16", "llama3-8b-lora-r16-8xh100"),
                         ("Full fine-tune", "llama3-8b-full-8xh100")):  # fmt: skip
        scenario = scenario_create(
            user=requester, project=project, name=name, spec=recipe_scenario(recipe),
            price_source="price_entry", price=list_price("H100-SXM"), model_preset="llama3-8b",
        )  # fmt: skip
        with django_capture_on_commit_callbacks(execute=False):
            done = run_execute(run_id=run_start(user=requester, scenario=scenario, seed=5).pk)
        assert done is not None
        assert done.status == "succeeded", done.error
        runs.append(done)
    draft = budget_request_create(
        user=requester, run=runs[0], title="Llama 3 8B LoRA", justification="Cheaper than full.",
        alternatives=runs[1:],
    )  # fmt: skip
    return budget_request_submit(user=requester, request=draft)


def test_a_fine_tuning_pack_shows_each_runs_training_method(
    fine_tuning: BudgetRequest, requester: User
) -> None:
    context = signoff_context(fine_tuning)
    lora, full = context["training_methods"]
    assert (lora.type, lora.rank, full.type) == ("lora", 16, "full")
    assert lora.trainable_parameters < full.trainable_parameters / 100
    sections = _sections(signoff_csv(fine_tuning))
    rows = sections[TRAINING_METHOD_HEADER]
    assert [row[2] for row in rows] == ["LoRA", "Full training"]
    assert int(rows[0][8]) == lora.trainable_count
    from openpyxl import load_workbook

    book = load_workbook(io.BytesIO(signoff_xlsx(fine_tuning)))
    assert book.sheetnames == [
        "Summary", "Comparison", "Training method", "Whole run", "Step margins", "Timeline",
    ]  # fmt: skip
    page = _client(requester).get(fine_tuning.get_absolute_url()).content.decode()
    pdf_html = render_to_string("budgets/signoff_pdf.html", context)
    for body in (page, pdf_html):
        assert 'data-testid="budget-training-method"' in body
        assert "LoRA r=16 on attention and MLP" in body


def test_a_pre_training_pack_has_no_training_method(submitted: BudgetRequest) -> None:
    assert signoff_context(submitted)["training_methods"] == []
    assert TRAINING_METHOD_HEADER not in _sections(signoff_csv(submitted))


def test_an_alternative_frozen_before_the_training_method_shows_none(
    fine_tuning: BudgetRequest,
) -> None:
    snapshot = fine_tuning.snapshot or {}
    for summary in (snapshot["chosen"], *snapshot["alternatives"]):
        del summary["training_method"]
    BudgetRequest.objects.filter(pk=fine_tuning.pk).update(snapshot=snapshot)
    lora, full = signoff_context(BudgetRequest.objects.get(pk=fine_tuning.pk))["training_methods"]
    assert lora is not None  # the chosen run's full estimate has it
    assert full is None
    assert "(not in this snapshot)" in signoff_csv(BudgetRequest.objects.get(pk=fine_tuning.pk))
