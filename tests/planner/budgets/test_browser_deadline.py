"""The demo against its deadline, in real Chromium.

The demo project's deadline is 150 days away. Finn, the approver, compares its three
scenarios: the A100 and TPU v5p runs miss the deadline at P50, the H100 quote meets it at P50
but misses it at P90, each with its chance of finishing in time, beside its layout, tokens/s
per device and the budget a request would ask. On the demo's budget request (for the H100s)
the deadline warning is in his decision card above Approve, and in the sign-off PDF's warnings,
whose "Checked" line names the deadline.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pytest
from pypdf import PdfReader
from pytest_django.live_server_helper import LiveServer
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from estimator.core.deadline import MISSES_P50, MISSES_P90
from planner.budgets.models import BudgetRequest
from planner.demo import demo_users_load
from planner.demo_project import DEMO_PROJECT, planner_demo_load
from planner.scenarios.deadline import run_deadline
from planner.scenarios.models import EstimationRun, Project
from planner.scenarios.views.figures import layout_compact
from pricing.demo import pricing_demo_load
from tests.conftest import ARTIFACTS
from tests.planner.budgets.test_browser_guards import _download, _log_in
from tests.planner.scenarios.test_browser_decisions import _whole

# The demo's runs go in-process (the embedded default `make run` loads), so its request exists.
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NAME = "test_browser_deadline"
#: What each demo accelerator's run says of the 150-day deadline (the issue's figures).
VERDICTS = {"A100-80GB-SXM": MISSES_P50, "H100-SXM": MISSES_P90, "TPU-v5p": MISSES_P50}
Screenshot = Callable[[str], Path]


def _latest(project: Project) -> dict[str, EstimationRun]:
    runs: dict[str, EstimationRun] = {}
    for scenario in project.scenarios.all():
        run = scenario.runs.get()
        assert run.status == "succeeded", run.error
        runs[scenario.accelerator_id] = run
    return runs


def _check_row(browser: WebDriver, run: EstimationRun, project: Project) -> str:
    row = browser.find_element(
        By.CSS_SELECTOR, f"tr[data-testid=comparison-row][data-scenario-id='{run.scenario_id}']"
    )
    verdict = row.find_element(By.CSS_SELECTOR, "[data-testid=deadline-verdict]")
    check = run_deadline(run, project=project)
    assert check is not None
    assert check.days_available == 150
    assert verdict.get_attribute("data-verdict") == check.verdict
    assert check.text in verdict.text
    assert f"{check.probability_text} chance in time" in verdict.text
    result, budget = run.result or {}, run.budget or {}
    layout = row.find_element(By.CSS_SELECTOR, "[data-testid=compare-layout]").text
    assert layout == layout_compact(result["parallelism"])
    speed = row.find_element(By.CSS_SELECTOR, "[data-testid=compare-tokens-per-s]").text
    assert speed == f"{round(result['tokens_per_s_per_gpu']):,}"
    asked = row.find_element(By.CSS_SELECTOR, "[data-testid=compare-requested]").text
    assert asked == _whole(budget["requested"])
    return check.verdict


def test_finn_sees_the_deadline_on_the_comparison_the_decision_card_and_the_pdf(
    eager_tasks: None, live_server: LiveServer, browser: WebDriver, screenshot: Screenshot
) -> None:
    demo_users_load()
    pricing_demo_load()
    planner_demo_load()
    project = Project.objects.get(name=DEMO_PROJECT)
    runs = _latest(project)
    base = live_server.url

    # The comparison: the A100 and TPU miss at P50, the H100 quote at P90.
    _log_in(browser, base, "finn")
    query = "&".join(f"scenario={run.scenario_id}" for run in runs.values())
    browser.get(f"{base}/projects/{project.pk}/compare/?{query}")
    shown = {accelerator: _check_row(browser, run, project) for accelerator, run in runs.items()}
    assert shown == VERDICTS
    table = browser.find_element(By.CSS_SELECTOR, "[data-testid=comparison-table]")
    browser.execute_script("arguments[0].scrollIntoView({block: 'start'})", table)
    screenshot("01-compare")

    # The demo's request is for the H100s: the note on P90 is in the card above Approve.
    budget = BudgetRequest.objects.get(project=project)
    assert budget.run == runs["H100-SXM"]
    browser.get(f"{base}{budget.get_absolute_url()}")
    card = browser.find_element(By.CSS_SELECTOR, "[data-testid=decision-form]")
    warnings = card.find_element(By.CSS_SELECTOR, "[data-testid=decision-warnings]")
    guard = warnings.find_element(
        By.CSS_SELECTOR, "[data-testid=guard][data-code=deadline_at_risk]"
    )
    assert "misses it at P90" in guard.text
    approve = card.find_element(By.CSS_SELECTOR, "[data-testid=approve-budget]")
    assert guard.location["y"] < approve.location["y"]  # read before the button
    browser.execute_script("arguments[0].scrollIntoView({block: 'start'})", card)
    screenshot("02-decision-card")

    # The pack he files: the warning among its warnings, the deadline among what it checked.
    pdf = _download(browser, base, "download-pdf")
    (ARTIFACTS / f"{NAME}-signoff.pdf").write_bytes(pdf)
    text = " ".join(
        " ".join(page.extract_text() for page in PdfReader(io.BytesIO(pdf)).pages).split()
    )
    warnings_text = text.partition("Warnings")[2].partition("Checked:")[0]
    assert "Meets the project's deadline" in warnings_text
    assert "misses it at P90" in warnings_text
    assert "the project's deadline (at P50 and P90)" in text.partition("Checked:")[2]
