"""The run page as a place to decide, in real Chromium: levers, what moves the budget, the bill.

The demo project's A100 scenario (Llama 3 70B on 2 T tokens, 256 A100s at GCP list price) has
a finished run. Its page lists the levers (single changes to the scenario, priced as the run
is), draws the tornado of what moves the budget (and switches it to training days), and shows
the whole bill, with checkpoint storage, data-set storage and egress priced from the public
book. Maya applies the first lever that fits: a new scenario with that one change. She runs it
(eagerly in the embedded mode, through Redis to a real Celery worker when PostgreSQL and Redis
are set), and the new run's deterministic GPU-hours and cost are the lever's.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from pytest_django.live_server_helper import LiveServer
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from planner.demo import demo_users_load
from planner.demo_project import DEMO_PROJECT, DEMO_SCENARIOS, planner_demo_load
from planner.scenarios.models import EstimationRun, RunStatus, Scenario
from pricing.demo import pricing_demo_load
from tests.conftest import page_replaced

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

#: The demo's three runs share one worker with the run of the lever (queued after them).
DEMO_TIMEOUT_S = 180
RUN_TIMEOUT_S = 120
A100_SCENARIO = DEMO_SCENARIOS[0][0]
APPLY_URL = re.compile(r"/runs/(\d+)/levers/(\d+)/apply/$")
SCENARIO_URL = re.compile(r"/scenarios/(\d+)/$")
#: The bill's lines priced from the book's storage and egress prices.
BOOK_LINES = ("checkpoint_storage", "dataset_storage", "egress")
#: What the bill shows for a line without an amount: an en dash.
NO_AMOUNT = "\N{EN DASH}"
Screenshot = Callable[[str], Path]

#: Chart.js's chart on the tornado canvas: its labels, the pixels it inked, its x-axis title.
TORNADO_CHART = """
const canvas = document.querySelector('[data-testid="tornado-chart"]');
const chart = canvas && window.Chart && window.Chart.getChart(canvas);
if (!chart) return null;
const pixels = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
let ink = 0;
for (let i = 3; i < pixels.length; i += 4) if (pixels[i] > 0) ink += 1;
return {
  labels: chart.data.labels,
  ink: ink,
  width: canvas.width,
  height: canvas.height,
  axis: chart.options.scales.x.title.text,
};
"""


def _type(browser: WebDriver, name: str, text: str) -> None:
    field = browser.find_element(By.NAME, name)
    field.clear()
    field.send_keys(text)


def _log_in(browser: WebDriver, base: str, username: str = "maya") -> None:
    browser.get(f"{base}/accounts/login/")
    _type(browser, "username", username)
    _type(browser, "password", f"{username}-demo-pass")
    browser.find_element(By.CSS_SELECTOR, "form.form button[type=submit]").click()
    browser.find_element(By.CSS_SELECTOR, "[data-testid=current-user]")


def _click_through(browser: WebDriver, element: WebElement) -> None:
    """Click a button that loads a new page, and wait until the old one is gone."""
    page = browser.find_element(By.TAG_NAME, "html")
    element.click()
    WebDriverWait(browser, 15).until(page_replaced(page))


def _scroll_to(browser: WebDriver, element: WebElement) -> None:
    browser.execute_script("arguments[0].scrollIntoView({block: 'start'})", element)


def _status(browser: WebDriver) -> str:
    badge = browser.find_element(By.CSS_SELECTOR, "[data-testid=run-status]")
    return badge.get_attribute("data-status") or ""


def _wait_for_run(browser: WebDriver) -> None:
    """The run page polls status.json and reloads itself when the run finishes."""
    WebDriverWait(
        browser,
        RUN_TIMEOUT_S,
        poll_frequency=0.25,
        ignored_exceptions=(NoSuchElementException, StaleElementReferenceException),
    ).until(lambda driver: _status(driver) in (RunStatus.SUCCEEDED, RunStatus.FAILED))
    assert _status(browser) == RunStatus.SUCCEEDED, browser.page_source[-3000:]


def _demo_run() -> EstimationRun:
    """The A100 scenario's latest run, once the demo's runs have finished (at load time in
    the embedded mode, on the worker otherwise)."""
    scenario = Scenario.objects.get(project__name=DEMO_PROJECT, name=A100_SCENARIO)
    deadline = time.monotonic() + DEMO_TIMEOUT_S
    while True:
        run = scenario.runs.order_by("-created_at", "-pk").first()
        assert run is not None, "the demo starts one run per scenario"
        if run.is_finished or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert run.status == RunStatus.SUCCEEDED, (run.status, run.error)
    return run


def _money(text: str) -> Decimal:
    """An amount as the page writes it ("1,234.56"), read back to the cent."""
    found = re.search(r"-?[\d,]+(?:\.\d+)?", text)
    assert found, text
    return Decimal(found.group(0).replace(",", ""))


def _whole(value: str) -> str:
    """A decimal string as ``floatformat:"0g"`` writes it: rounded half up, grouped."""
    return f"{Decimal(value).quantize(Decimal(1), rounding=ROUND_HALF_UP):,}"


def _check_levers(browser: WebDriver, run: EstimationRun) -> list[WebElement]:
    section = browser.find_element(By.CSS_SELECTOR, "[data-testid=levers]")
    rows = section.find_elements(
        By.CSS_SELECTOR, "[data-testid=levers-table] [data-testid=lever-row]"
    )
    levers: list[dict[str, Any]] = run.levers or []
    assert rows, "the demo run has levers"
    assert len(rows) == len(levers)
    for row, lever in zip(rows, levers, strict=True):
        cells = row.find_elements(By.CSS_SELECTOR, "td")
        assert lever["change"] in cells[0].text
        assert row.get_attribute("data-kind") == lever["kind"]
        assert row.get_attribute("data-saved") == lever["cost_saved"]
        days = cells[1].text
        assert days.startswith(f"{lever['training_days']:,.1f}"), days
        assert re.search(r"days (sooner|later)", days), days
        assert cells[2].text == _whole(str(lever["gpu_hours"]))
        cost = cells[3].text
        assert cost.startswith(_whole(lever["cost"])), cost
        assert re.search(r"saves [\d,]+|costs [\d,]+ more", cost), cost
        saved = Decimal(lever["cost_saved"])
        assert ("saves" in cost) == (saved > 0), (cost, saved)
        assert ("does not fit" in cells[0].text) == (not lever["fits_in_memory"])
        assert row.find_elements(By.CSS_SELECTOR, "[data-testid=apply-lever]")
    _scroll_to(browser, section)
    return rows


def _tornado(browser: WebDriver) -> dict[str, Any]:
    found: dict[str, Any] | None = WebDriverWait(browser, 10).until(
        lambda driver: driver.execute_script(TORNADO_CHART)
    )
    assert found is not None
    return found


def _check_tornado(browser: WebDriver, run: EstimationRun, screenshot: Screenshot) -> None:
    section = browser.find_element(By.CSS_SELECTOR, "[data-testid=tornado]")
    table_rows = section.find_elements(By.CSS_SELECTOR, "[data-testid=tornado-table] tbody tr")
    assert run.sensitivity is not None
    assert len(table_rows) == len(run.sensitivity["inputs"]) > 0
    chart = _tornado(browser)
    assert chart["width"] > 0, chart
    assert chart["height"] > 0, chart
    assert chart["ink"] > 0, chart
    assert sorted(chart["labels"]) == sorted(
        row.find_element(By.CSS_SELECTOR, "th").text for row in table_rows
    )
    assert chart["axis"].startswith("Cost ("), chart["axis"]
    cost, days = (
        section.find_element(By.CSS_SELECTOR, f"[data-tornado-metric={metric}]")
        for metric in ("cost", "days")
    )
    assert cost.is_displayed()
    assert days.is_displayed()
    assert (cost.get_attribute("aria-pressed"), days.get_attribute("aria-pressed")) == (
        "true",
        "false",
    )
    _scroll_to(browser, section)
    screenshot("02-tornado-cost")
    days.click()
    assert (cost.get_attribute("aria-pressed"), days.get_attribute("aria-pressed")) == (
        "false",
        "true",
    )
    switched = _tornado(browser)
    assert switched["axis"].startswith("Training days"), switched["axis"]
    assert len(switched["labels"]) == len(table_rows)
    assert switched["ink"] > 0
    canvas = section.find_element(By.CSS_SELECTOR, "[data-testid=tornado-chart]")
    assert (canvas.get_attribute("aria-label") or "").startswith("Training days")


def _check_bill(browser: WebDriver, run: EstimationRun) -> None:
    section = browser.find_element(By.CSS_SELECTOR, "[data-testid=whole-bill]")
    assert run.budget is not None
    bill = run.budget["bill"]
    assert not bill["unpriced"], "the public book prices storage and egress at GCP"
    counted = Decimal(0)
    for line in bill["lines"]:
        row = section.find_element(By.CSS_SELECTOR, f"tr[data-line={line['key']}]")
        cells = row.find_elements(By.CSS_SELECTOR, "td")
        shown = cells[3].text.strip()
        if line["key"] in BOOK_LINES:
            assert line["amount"] is not None, line
            assert Decimal(line["amount"]) > 0, line
            assert "no price" not in cells[2].text, cells[2].text
        if line["amount"] is None:
            assert shown == NO_AMOUNT, (line["key"], shown)
            continue
        amount = _money(shown)
        assert amount == Decimal(line["amount"]), (line["key"], shown)
        if "not added" not in cells[0].text:
            counted += amount
    total = _money(section.find_element(By.CSS_SELECTOR, "[data-testid=bill-total]").text)
    assert total == counted == Decimal(bill["total"])
    assert section.find_element(By.CSS_SELECTOR, "[data-testid=input-pipeline]").text
    _scroll_to(browser, section)


def test_maya_applies_a_lever_of_the_demo_run_and_runs_it(
    live_server: LiveServer,
    browser: WebDriver,
    screenshot: Screenshot,
    request: pytest.FixtureRequest,
) -> None:
    if not settings.CELERY_TASK_ALWAYS_EAGER:
        request.getfixturevalue("celery_worker")  # the runs really go through Redis
    demo_users_load()
    pricing_demo_load()
    planner_demo_load()
    run = _demo_run()
    assert run.price["source"] == "price_entry"
    assert run.levers
    assert run.sensitivity
    assert run.budget is not None
    assert run.budget.get("bill")
    base = live_server.url

    # Maya opens the A100 run: levers with figures, the tornado, the whole bill.
    _log_in(browser, base)
    browser.get(f"{base}{run.get_absolute_url()}")
    assert _status(browser) == RunStatus.SUCCEEDED
    assert (
        browser.find_element(By.CSS_SELECTOR, "[data-testid=compare-runs]").get_attribute("href")
        == f"{base}/runs/{run.pk}/diff/"
    )
    rows = _check_levers(browser, run)
    screenshot("01-levers")
    _check_tornado(browser, run, screenshot)
    screenshot("03-tornado-days")
    _check_bill(browser, run)
    screenshot("04-bill")

    # She applies the first lever that fits: a new scenario with that one change.
    row = next(row for row in rows if not row.find_elements(By.CSS_SELECTOR, ".badge.bad"))
    apply = row.find_element(By.CSS_SELECTOR, "[data-testid=apply-lever]")
    action = apply.find_element(By.XPATH, "./ancestor::form").get_attribute("action") or ""
    match = APPLY_URL.search(action)
    assert match, action
    assert int(match.group(1)) == run.pk, action
    lever: dict[str, Any] = (run.levers or [])[int(match.group(2))]
    assert lever["fits_in_memory"]
    assert lever["change"] in row.text
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", apply)
    _click_through(browser, apply)
    found = SCENARIO_URL.search(browser.current_url)
    assert found, browser.current_url
    scenario = Scenario.objects.get(pk=int(found.group(1)))
    assert scenario.project == run.scenario.project
    assert scenario.name == f"{run.scenario.name} · {lever['change']}"
    assert scenario.spec == lever["scenario"]
    assert scenario.price_source == run.scenario.price_source
    assert scenario.price == run.scenario.price
    assert scenario.name in browser.find_element(By.TAG_NAME, "h1").text
    screenshot("05-new-scenario")

    # She runs it: the run's deterministic GPU-hours and cost are the lever's.
    _click_through(browser, browser.find_element(By.CSS_SELECTOR, "[data-testid=run-button]"))
    assert "/runs/" in browser.current_url
    _wait_for_run(browser)
    new_run = EstimationRun.objects.get(scenario=scenario)
    assert browser.current_url.endswith(new_run.get_absolute_url())
    assert new_run.status == RunStatus.SUCCEEDED
    assert new_run.result is not None
    assert new_run.budget is not None
    assert new_run.result["gpu_hours"] == pytest.approx(lever["gpu_hours"], rel=1e-9, abs=0)
    assert new_run.budget["cost"]["deterministic"] == lever["cost"]
    assert new_run.result["fits_in_memory"] is True
    assert browser.find_element(By.CSS_SELECTOR, "[data-testid=levers]")
    screenshot("06-new-run")

    # The diff of the two runs: the lever's one change, and what it moved.
    browser.get(f"{base}/runs/{new_run.pk}/diff/?other={run.pk}")
    assert browser.find_element(By.CSS_SELECTOR, "[data-testid=diff-title]")
    screenshot("07-diff")
