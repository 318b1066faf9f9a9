"""The sign-off pack's whole run, step margins and training method: every run of the request,
side by side in the documents and long-form in the CSV and XLSX, all read from the snapshot.

The runs are real (started and executed by the worker's service). One test strips the newer
figures from a frozen snapshot to stand for a request submitted before they existed.
"""

from __future__ import annotations

import csv
import io
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.template.loader import render_to_string
from django.utils import timezone
from numpy.testing import assert_allclose
from pypdf import PdfReader

from estimator.core.presets import recipe_scenario
from planner.budgets.models import BudgetRequest
from planner.budgets.services import (
    budget_request_approve,
    budget_request_create,
    budget_request_submit,
)
from planner.budgets.signoff import (
    signoff_context,
    signoff_csv,
    signoff_pack_context,
    signoff_pdf,
    signoff_xlsx,
)
from planner.budgets.signoff.tables import (
    COMPARISON_HEADER,
    MARGINS_HEADER,
    TRAINING_METHOD_HEADER,
    WHOLE_RUN_HEADER,
)
from planner.scenarios.breakdowns import percent_text
from planner.scenarios.models import EstimationRun, Project, Scenario
from planner.scenarios.services import run_execute, run_start, scenario_create
from pricing.demo import EXAMPLE_BOOK_NAME
from pricing.models import PriceEntry
from tests.planner.conftest import _client, list_price, small_spec

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
        # Rounded for reading: days to a tenth, GPU-hours whole, shares to a tenth of a %.
        assert float(lines["Total"][3]) == pytest.approx(result["training_days"], abs=0.05)
        assert len(lines["Total"][3].partition(".")[2]) <= 1
        assert int(lines["Allocation idle"][4]) == pytest.approx(
            result["whole_run"]["parts_gpu_hours"]["allocation_idle"], abs=0.5
        )
        shares = {row[2]: float(row[3]) for row in margins if row[1] == str(run.pk)}
        assert shares == pytest.approx(
            {
                "Framework overhead": result["margins_applied"]["framework_overhead"],
                "Network jitter": result["margins_applied"]["network_jitter"],
            },
            abs=0.0005,
        )


def test_the_xlsx_has_a_sheet_for_the_whole_run_and_one_for_the_margins(
    submitted: BudgetRequest, runs: list[EstimationRun]
) -> None:
    from openpyxl import load_workbook

    book = load_workbook(io.BytesIO(signoff_xlsx(submitted)))
    assert book.sheetnames == [
        "Summary", "Comparison", "Whole run", "Step margins", "Whole bill", "Levers",
        "Timeline", "Data",
    ]  # fmt: skip
    bill = list(book["Whole bill"].iter_rows(values_only=True))
    frozen = (submitted.run.budget or {})["bill"]
    assert [row[0] for row in bill[1:-1]] == [line["label"] for line in frozen["lines"]]
    assert bill[-1][4] == float(Decimal(frozen["total"]))
    levers = list(book["Levers"].iter_rows(values_only=True))
    chosen = submitted.run.levers or []
    assert [row[0] for row in levers[1:]] == [lever["change"] for lever in chosen]
    assert [row[5] for row in levers[1:]] == [
        float(Decimal(lever["cost_saved"])) for lever in chosen
    ]
    whole_run = list(book["Whole run"].iter_rows(values_only=True))
    assert whole_run[0] == WHOLE_RUN_HEADER
    totals = [row for row in whole_run[1:] if row[2] == "Total"]
    assert [row[1] for row in totals] == [run.pk for run in runs]
    for row, run in zip(totals, runs, strict=True):
        assert row[3] == pytest.approx(_result(run)["training_days"], abs=0.05)
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
        "Summary", "Comparison", "Training method", "Whole run", "Step margins", "Whole bill",
        "Levers",
        "Timeline", "Data",
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


# --- A pack finance can file: warnings, price, formats, sign-off ---------------------------------


def _flagged_entry() -> PriceEntry:
    """An H100 entry of the demo book that its source data marks as suspect."""
    entry = (
        PriceEntry.objects.filter(book__name=EXAMPLE_BOOK_NAME, accelerator__catalog_id="H100-SXM")
        .exclude(data_flag="")
        .first()
    )
    assert entry is not None, "the demo book has no flagged H100 price"
    return entry


@pytest.fixture
def flagged(
    project: Project, requester: User, prices: None, django_capture_on_commit_callbacks: Any
) -> BudgetRequest:
    """A submitted request whose run is priced at a flagged price-book entry."""
    scenario = scenario_create(
        user=requester, project=project, name="H100 at a suspect price",
        spec=small_spec("H100-SXM", 64), price_source="price_entry", price=_flagged_entry(),
    )  # fmt: skip
    with django_capture_on_commit_callbacks(execute=False):
        run = run_execute(run_id=run_start(user=requester, scenario=scenario, seed=5).pk)
    assert run is not None
    assert run.status == "succeeded", run.error
    draft = budget_request_create(user=requester, run=run, title="On a suspect price",
                                  justification="Cheapest H100.")  # fmt: skip
    return budget_request_submit(user=requester, request=draft)


def _book(request: BudgetRequest) -> Any:
    from openpyxl import load_workbook

    return load_workbook(io.BytesIO(signoff_xlsx(request)))


def _csv_summary(text: str) -> list[list[str]]:
    """The CSV's first block: the summary, header row first."""
    return list(csv.reader(io.StringIO(text.strip().split("\r\n\r\n")[0])))


def _pdf_text(request: BudgetRequest) -> str:
    reader = PdfReader(io.BytesIO(signoff_pdf(request)))
    return " ".join(" ".join(page.extract_text() for page in reader.pages).split())


def _flag_warnings(request: BudgetRequest) -> list[dict[str, str]]:
    snapshot = request.snapshot or {}
    return [w for w in snapshot["warnings"] if w["code"] == "price_flagged"]


def test_a_flagged_price_is_frozen_with_its_warning(flagged: BudgetRequest) -> None:
    snapshot = flagged.snapshot or {}
    assert snapshot["price_record"]["data_flag"] == _flagged_entry().data_flag
    [warning] = _flag_warnings(flagged)
    assert _flagged_entry().data_flag.strip() in warning["message"]


def test_the_xlsx_summary_shows_the_flag_the_warnings_and_the_price(
    flagged: BudgetRequest,
) -> None:
    snapshot, entry = flagged.snapshot or {}, _flagged_entry()
    rows = list(_book(flagged)["Summary"].iter_rows(values_only=True))
    assert rows[0] == ("Item", "Value")
    summary = dict(rows)
    assert summary["Price data flag"] == entry.data_flag.strip()
    warnings = [value for label, value in rows if str(label).startswith("Warning")]
    for warning in snapshot["warnings"]:
        assert any(warning["message"][1:] in str(text) for text in warnings), warning
    labels = [label for label, _ in rows]
    # The warnings come before the figures.
    assert labels.index("Warnings") < labels.index("Amount")
    record = snapshot["price_record"]
    assert Decimal(str(summary["Price per accelerator-hour"])) == Decimal(
        snapshot["price"]["price_per_gpu_hour"]
    )
    assert summary["Price currency"] == snapshot["price"]["currency"]
    assert (summary["Provider"], summary["Region"]) == (record["provider"], record["region"])
    assert summary["Instance type"] == record["instance_type"]
    assert summary["Price book"] == record["book"]["name"]
    fetched = timezone.localdate(datetime.fromisoformat(record["book"]["fetched_at"]))
    assert summary["Price book date"].date() == fetched  # a real date, not text
    assert summary["Snapshot SHA-256"] == flagged.snapshot_sha256


def test_the_csv_summary_shows_the_flag_and_the_warnings(flagged: BudgetRequest) -> None:
    snapshot = flagged.snapshot or {}
    rows = _csv_summary(signoff_csv(flagged))
    summary = dict(rows)
    assert summary["Price data flag"] == _flagged_entry().data_flag.strip()
    [flag_warning] = _flag_warnings(flagged)
    assert any(flag_warning["message"][1:] in row[1] for row in rows if row[0] == "Warning")
    assert summary["Price book"] == snapshot["price_record"]["book"]["name"]
    assert summary["Price per accelerator-hour"] == str(
        Decimal(snapshot["price"]["price_per_gpu_hour"]).quantize(Decimal("0.0001"))
    )


def test_the_pdf_shows_the_flag_and_warnings_before_the_figures(
    flagged: BudgetRequest,
) -> None:
    text = _pdf_text(flagged)
    flag = " ".join(_flagged_entry().data_flag.split())
    assert flag in text
    [flag_warning] = _flag_warnings(flagged)
    assert " ".join(flag_warning["message"].split())[1:] in text
    assert text.index("Warnings") < text.lower().index("amount requested")  # a KPI, in capitals
    record = (flagged.snapshot or {})["price_record"]
    assert record["book"]["name"] in text
    assert record["instance_type"] in text


def test_the_xlsx_gives_every_number_a_format_and_rounds_it(submitted: BudgetRequest) -> None:
    book = _book(submitted)
    header = [cell.value for cell in book["Comparison"][1]]
    chosen = dict(zip(header, book["Comparison"][2], strict=True))
    for name in book.sheetnames:
        for row in book[name].iter_rows(min_row=2):
            for cell in row:
                if isinstance(cell.value, int | float) and not isinstance(cell.value, bool):
                    assert cell.number_format != "General", (name, cell.coordinate)
    run = (submitted.snapshot or {})["chosen"]
    days = run["training_days"]["p50"]
    assert chosen["Days P50"].value == pytest.approx(days, abs=0.05)
    assert chosen["Days P50"].value != days  # not 64.53961973775718 days
    assert chosen["Days P50"].number_format == "0.0"
    assert chosen["MFU"].value == pytest.approx(run["mfu"], abs=0.0005)
    assert chosen["MFU"].number_format == "0.0%"
    assert chosen["Cost P50"].number_format == "#,##0.00"
    assert chosen["GPU-hours P50"].number_format == "#,##0"
    assert isinstance(chosen["GPUs"].value, int)
    assert book["Summary"].freeze_panes == book["Comparison"].freeze_panes == "A2"
    assert all(cell.font.bold for cell in book["Comparison"][1])
    when = book["Timeline"]["A2"]
    assert when.is_date
    assert when.value.date() == timezone.localdate(submitted.created_at)


def test_the_data_sheet_keeps_the_full_precision_of_the_snapshot(
    submitted: BudgetRequest,
) -> None:
    """As precise as a workbook cell keeps a float: 16 significant digits (openpyxl writes
    ``%.16g``), where the main sheets keep a tenth of a day."""
    snapshot = submitted.snapshot or {}
    rows = list(_book(submitted)["Data"].iter_rows(values_only=True))
    assert rows[0] == COMPARISON_HEADER
    for row, run in zip(rows[1:], [snapshot["chosen"], *snapshot["alternatives"]], strict=True):
        figures = dict(zip(COMPARISON_HEADER, row, strict=True))
        assert figures["Days P50"] == pytest.approx(run["training_days"]["p50"], rel=1e-15)
        assert figures["Days P50"] != round(run["training_days"]["p50"], 1)
        assert figures["MFU"] == pytest.approx(run["mfu"], rel=1e-15)
        assert Decimal(str(figures["Cost P90"])) == Decimal(run["cost"]["p90"])
        assert Decimal(str(figures["GPU-hours P50"])) == Decimal(run["gpu_hours"]["p50"])
        assert run["memory_verdict"] == "fits"
        assert figures["Memory"] == "fits in memory"  # the verdict in the pages' words


def test_an_old_snapshot_without_the_verdict_shows_the_one_its_figures_give(
    submitted: BudgetRequest,
) -> None:
    snapshot = submitted.snapshot or {}
    del snapshot["chosen"]["memory_verdict"]
    snapshot["chosen"]["fits_in_memory"] = False
    BudgetRequest.objects.filter(pk=submitted.pk).update(snapshot=snapshot)
    rows = list(
        _book(BudgetRequest.objects.get(pk=submitted.pk))["Data"].iter_rows(values_only=True)
    )
    assert dict(zip(COMPARISON_HEADER, rows[1], strict=True))["Memory"] == "does not fit in memory"


def test_the_xlsx_columns_are_as_wide_as_their_text(submitted: BudgetRequest) -> None:
    sheet = _book(submitted)["Comparison"]
    widths = {cell.column_letter: sheet.column_dimensions[cell.column_letter].width
              for cell in sheet[1]}  # fmt: skip
    assert len(set(widths.values())) > 3
    scenarios = [str(cell.value) for (cell,) in sheet.iter_rows(min_col=1, max_col=1)]
    assert widths["A"] >= max(len(name) for name in scenarios)
    justification = _book(submitted)["Summary"]
    assert justification.column_dimensions["B"].width >= len(submitted.snapshot_sha256)


def test_the_csv_has_the_xlsx_columns_and_values(submitted: BudgetRequest) -> None:
    book, sections = _book(submitted), _sections(signoff_csv(submitted))
    for name in ("Comparison", "Whole run", "Step margins", "Timeline"):
        xlsx = list(book[name].iter_rows(values_only=True))
        header = tuple(str(value) for value in xlsx[0])
        assert header in sections, name
        for csv_row, xlsx_row in zip(sections[header], xlsx[1:], strict=True):
            for text, value in zip(csv_row, xlsx_row, strict=False):
                if isinstance(value, bool) or not isinstance(value, int | float):
                    continue
                assert float(text) == pytest.approx(value, rel=1e-12), (name, header)
    summary = _csv_summary(signoff_csv(submitted))
    assert tuple(summary[0]) == next(book["Summary"].iter_rows(values_only=True))


def test_the_pdf_has_a_block_to_sign_until_an_approver_decides(
    submitted: BudgetRequest, approver: User
) -> None:
    html = render_to_string("budgets/signoff_pdf.html", signoff_pack_context(submitted))
    assert html.count('data-testid="signoff-open"') == submitted.approvals_required
    assert 'data-testid="signoff-decision"' not in html
    text = _pdf_text(submitted)
    for line in ("Sign-off", "Approver name", "Signature", "Date"):
        assert line in text, line
    budget_request_approve(user=approver, request=submitted, comment="Within plan, go ahead.")
    decided = BudgetRequest.objects.get(pk=submitted.pk)
    html = render_to_string("budgets/signoff_pdf.html", signoff_pack_context(decided))
    assert html.count('data-testid="signoff-decision"') == 1
    assert 'data-testid="signoff-open"' not in html
    text = _pdf_text(decided)
    decision = decided.decisions.get()
    for shown in ("Approved", approver.username, "Within plan, go ahead.",
                  f"{timezone.localtime(decision.created_at):%Y}"):  # fmt: skip
        assert shown in text.partition("Sign-off")[2], shown


def test_a_warning_arisen_since_submission_is_marked(submitted: BudgetRequest) -> None:
    price = (submitted.snapshot or {})["price"]
    assert not [w for w in (submitted.snapshot or {})["warnings"] if w["code"] == "price_flagged"]
    PriceEntry.objects.filter(pk=price["id"]).update(data_flag="SUSPECT: found after submission")
    rows = _csv_summary(signoff_csv(submitted))
    later = [value for label, value in rows if label == "Warning (since submission)"]
    assert any("SUSPECT: found after submission" in value for value in later)
    # What the snapshot froze does not move: its price record had no flag.
    assert dict(rows)["Price data flag"] == "none"
    assert "since submission" in _pdf_text(submitted)


def test_an_old_snapshot_without_warnings_gets_the_runs_warnings_now(
    flagged: BudgetRequest,
) -> None:
    snapshot = flagged.snapshot or {}
    kept = snapshot.pop("warnings")
    del snapshot["override_reason"], snapshot["price_record"]["data_flag"]
    BudgetRequest.objects.filter(pk=flagged.pk).update(snapshot=snapshot)
    old = BudgetRequest.objects.get(pk=flagged.pk)
    summary = _csv_summary(signoff_csv(old))
    shown = [value for label, value in summary if label in ("Warning", "Blocking warning")]
    assert all(w["message"][1:] in text for w, text in zip(kept, shown, strict=True))
    assert dict(summary)["Warnings checked"].startswith("at export")
    assert dict(summary)["Price data flag"].startswith("(not in this snapshot")


def test_the_override_reason_and_a_blocking_warning_are_in_every_format(
    submitted: BudgetRequest,
) -> None:
    snapshot = submitted.snapshot or {}
    blocking = {"code": "does_not_fit", "severity": "block",
                "message": "does not fit in memory: needs 99 GiB per GPU of 80 GiB"}  # fmt: skip
    snapshot["warnings"] = [blocking]
    snapshot["override_reason"] = "=Measured on a pilot run: it fits with activation offload"
    BudgetRequest.objects.filter(pk=submitted.pk).update(snapshot=snapshot)
    request = BudgetRequest.objects.get(pk=submitted.pk)
    summary = dict(_csv_summary(signoff_csv(request)))
    assert summary["Blocking warning"] == "D" + blocking["message"][1:]
    assert summary["Override reason"] == "'" + snapshot["override_reason"]  # formula-safe
    xlsx = dict(_book(request)["Summary"].iter_rows(values_only=True))
    assert xlsx["Override reason"] == "'" + snapshot["override_reason"]
    assert str(xlsx["Warnings"]).endswith("(1 blocking)")
    text = _pdf_text(request)
    assert "BLOCKING" in text
    assert "Measured on a pilot run" in text.partition("Override reason")[2]


def test_the_pdf_lists_the_deadline_among_what_it_checked(submitted: BudgetRequest) -> None:
    assert submitted.project.deadline is None
    html = render_to_string("budgets/signoff_pdf.html", signoff_pack_context(submitted))
    checked = html.partition('data-testid="pdf-checked">')[2].partition("</p>")[0]
    assert "the project&#x27;s deadline (at P50 and P90)" in checked
    assert "memory" in checked
    # The chosen run's training-time figure, then its row and its alternative's.
    assert html.count('data-verdict="no_deadline"') == 3


def test_a_run_late_at_p50_is_in_the_pdf_warnings_and_comparison(
    runs: list[EstimationRun], requester: User
) -> None:
    project = runs[0].scenario.project
    for run in runs:
        assert run.montecarlo is not None
        assert run.montecarlo["training_days"]["p50"] > 1, "both runs take more than a day"
    project.deadline = timezone.localdate() + timedelta(days=1)
    project.save(update_fields=["deadline"])
    draft = budget_request_create(
        user=requester, run=runs[0], title="8B", justification="Late, but the launch moved.",
        alternatives=runs[1:], override_reason="The launch moved to Q4.",
    )  # fmt: skip
    request = budget_request_submit(user=requester, request=draft)
    html = render_to_string("budgets/signoff_pdf.html", signoff_pack_context(request))
    warnings = html.partition('data-testid="pdf-warnings"')[2].partition("</section>")[0]
    assert 'data-code="misses_deadline"' in warnings
    assert html.count('data-verdict="misses_p50"') == 3
    text = _pdf_text(request)
    assert "BLOCKING Misses the project's deadline" in text
    assert "misses at P50" in text.partition("Chosen run and alternatives")[2]


def test_the_xlsx_and_csv_comparison_carry_each_runs_deadline_verdict(
    runs: list[EstimationRun], requester: User
) -> None:
    project = runs[0].scenario.project
    project.deadline = timezone.localdate() + timedelta(days=1)
    project.save(update_fields=["deadline"])
    draft = budget_request_create(
        user=requester, run=runs[0], title="8B", justification="Late.", alternatives=runs[1:],
        override_reason="The launch moved to Q4.",
    )  # fmt: skip
    request = budget_request_submit(user=requester, request=draft)
    snapshot = request.snapshot or {}
    sheet = list(_book(request)["Comparison"].iter_rows(values_only=True))
    header = sheet[0]
    for row, run in zip(sheet[1:], [snapshot["chosen"], *snapshot["alternatives"]], strict=True):
        figures = dict(zip(header, row, strict=True))
        assert figures["Deadline"] == run["deadline"]["text"] == "misses at P50"
        assert figures["Chance in time"] == pytest.approx(run["deadline"]["probability"], abs=5e-4)
    csv_rows = _sections(signoff_csv(request))[tuple(COMPARISON_HEADER)]
    assert [row[COMPARISON_HEADER.index("Deadline")] for row in csv_rows] == ["misses at P50"] * 2
