"""The main journey in real Chromium: a requester plans three ways to train one model, and
finance signs the budget off.

Maya creates a project, adds three scenarios (A100, H100 and TPU v5p at list prices), runs
them, watches them finish, and compares them side by side with charts. She then requests the
budget of the cheapest run, compared with the other two, and submits it. Finn, an approver,
finds it in his queue, approves it with a comment and downloads the sign-off PDF, whose text
holds the project and the snapshot hash the page shows. Runs really execute: eagerly in the
embedded mode, on a real Celery worker when PostgreSQL and Redis are set.
"""

from __future__ import annotations

import io
import urllib.request
from collections.abc import Callable
from decimal import Decimal
from functools import partial
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from selenium.common.exceptions import (
    NoSuchElementException,
    StaleElementReferenceException,
    WebDriverException,
)
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select, WebDriverWait

from organisations.demo import demo_organisation
from organisations.models import Role
from organisations.services import membership_grant
from planner.budgets.models import BudgetRequest, BudgetState
from planner.demo import demo_users_load
from planner.scenarios.models import EstimationRun, Project, RunStatus
from pricing.demo import pricing_demo_load
from tests.conftest import ARTIFACTS, page_replaced
from tests.planner.conftest import list_price

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RUN_TIMEOUT_S = 90
JOURNEY = "test_a_requester_compares_three_accelerators_in_the_browser"
#: (scenario name, accelerator, GPUs, provider of the list price)
SCENARIOS = (
    ("A100 80GB at AWS list price", "A100-80GB-SXM", 64, "aws"),
    ("H100 at Nebius list price", "H100-SXM", 64, "nebius"),
    ("TPU v5p at GCP list price", "TPU-v5p", 64, "gcp"),
)
Screenshot = Callable[[str], Path]

CANVAS_INK = """
const canvas = document.querySelector(`[data-testid="${arguments[0]}"]`);
if (!canvas || !window.Chart || !window.Chart.getChart(canvas)) return -1;
const pixels = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
let ink = 0;
for (let i = 3; i < pixels.length; i += 4) if (pixels[i] > 0) ink += 1;
return ink;
"""


def _inked(driver: WebDriver, *, chart: str) -> bool:
    """Whether Chart.js has drawn on the canvas (-1 before it has made the chart)."""
    return int(driver.execute_script(CANVAS_INK, chart)) > 0


def _css(browser: WebDriver, selector: str) -> object:
    return browser.find_element(By.CSS_SELECTOR, selector)


def _type(browser: WebDriver, name: str, text: str) -> None:
    field = browser.find_element(By.NAME, name)
    field.clear()
    field.send_keys(text)


def _log_in(
    browser: WebDriver, base: str, username: str = "maya", full_name: str = "Maya Lindqvist"
) -> None:
    browser.get(f"{base}/accounts/login/")
    _type(browser, "username", username)
    _type(browser, "password", f"{username}-demo-pass")
    browser.find_element(By.CSS_SELECTOR, "form.form button[type=submit]").click()
    assert _css(browser, "[data-testid=current-user]").text == full_name  # type: ignore[attr-defined]


def _click_through(browser: WebDriver, selector: str) -> None:
    """Click a link or button that loads a new page, and wait until the old one is gone."""
    page = browser.find_element(By.TAG_NAME, "html")
    browser.find_element(By.CSS_SELECTOR, selector).click()
    WebDriverWait(browser, 15).until(page_replaced(page))


def _log_out(browser: WebDriver) -> None:
    browser.find_element(By.CSS_SELECTOR, "header form[action$='/logout/'] button").click()
    WebDriverWait(browser, 10).until(
        lambda driver: not driver.find_elements(By.CSS_SELECTOR, "[data-testid=current-user]")
    )


def _create_project(browser: WebDriver, screenshot: Screenshot) -> Project:
    browser.find_element(By.CSS_SELECTOR, "[data-testid=new-project]").click()
    _type(browser, "name", "Llama 3 8B continued pre-training")
    _type(browser, "goal", "200 B more tokens of code and maths before the summer release.")
    _type(browser, "budget_ceiling", "250000")
    screenshot("01-new-project")
    browser.find_element(By.CSS_SELECTOR, "[data-testid=create-project]").click()
    heading = browser.find_element(By.CSS_SELECTOR, "[data-testid=project-name]")
    assert heading.text == "Llama 3 8B continued pre-training"
    return Project.objects.get(name=heading.text)


def _add_scenario(
    browser: WebDriver, name: str, accelerator: str, gpus: int, provider: str
) -> None:
    browser.find_element(By.CSS_SELECTOR, "[data-testid=add-scenario]").click()
    _type(browser, "name", name)
    Select(browser.find_element(By.NAME, "model_preset")).select_by_value("llama3-8b")
    _type(browser, "tokens", "200B")
    Select(browser.find_element(By.NAME, "accelerator")).select_by_value(accelerator)
    _type(browser, "num_gpus", str(gpus))
    price = list_price(accelerator, provider=provider)
    Select(browser.find_element(By.NAME, "price")).select_by_value(f"price_entry:{price.pk}")


def _run_status(driver: WebDriver) -> str | None:
    """The run page's status badge, or None while the page reloads under us: Chromium then
    reports the badge's node as gone from the document (a WebDriverException of its own, not
    a StaleElementReferenceException)."""
    try:
        badge = driver.find_element(By.CSS_SELECTOR, "[data-testid=run-status]")
        return badge.get_attribute("data-status")
    except WebDriverException as error:
        if "does not belong to the document" in str(error):
            return None
        raise


def _wait_for_status(browser: WebDriver, status: str) -> None:
    """The run page polls status.json and reloads itself when the run finishes."""
    waiting = WebDriverWait(
        browser,
        RUN_TIMEOUT_S,
        poll_frequency=0.25,
        ignored_exceptions=(NoSuchElementException, StaleElementReferenceException),
    )
    waiting.until(lambda driver: _run_status(driver) in (status, RunStatus.FAILED))
    badge = browser.find_element(By.CSS_SELECTOR, "[data-testid=run-status]")
    assert badge.get_attribute("data-status") == status, browser.page_source[-3000:]


def test_a_requester_compares_three_accelerators_in_the_browser(
    live_server: object,
    browser: WebDriver,
    screenshot: Screenshot,
    request: pytest.FixtureRequest,
) -> None:
    if not settings.CELERY_TASK_ALWAYS_EAGER:
        request.getfixturevalue("celery_worker")  # runs really go through Redis to a worker
    pricing_demo_load()
    demo_users_load()  # maya, and finn: finance, who approves budgets
    organisation = demo_organisation()  # the one the demo users and quote belong to
    membership_grant(
        organisation=organisation, user=User.objects.get(username="maya"), role=Role.REQUESTER
    )
    membership_grant(
        organisation=organisation, user=User.objects.get(username="finn"), role=Role.APPROVER
    )
    base = live_server.url  # type: ignore[attr-defined]
    _log_in(browser, base)
    screenshot("00-dashboard")
    project = _create_project(browser, screenshot)
    screenshot("02-project-empty")

    for index, (name, accelerator, gpus, provider) in enumerate(SCENARIOS, start=1):
        browser.get(f"{base}{project.get_absolute_url()}")
        _add_scenario(browser, name, accelerator, gpus, provider)
        screenshot(f"03-scenario-{index}-form")
        browser.find_element(By.CSS_SELECTOR, "[data-testid=save-scenario]").click()
        assert browser.find_element(By.CSS_SELECTOR, "[data-testid=scenario-name]").text.startswith(
            name
        )
        browser.find_element(By.CSS_SELECTOR, "[data-testid=run-button]").click()
        WebDriverWait(browser, 15).until(lambda driver: "/runs/" in driver.current_url)
        screenshot(f"04-run-{index}-started")  # the live progress bar, when a worker runs it
        _wait_for_status(browser, RunStatus.SUCCEEDED)
        screenshot(f"05-run-{index}-finished")

    browser.get(f"{base}{project.get_absolute_url()}")
    statuses = browser.find_elements(By.CSS_SELECTOR, "[data-testid=run-status]")
    assert [s.get_attribute("data-status") for s in statuses] == ["succeeded"] * 3
    screenshot("06-project-estimated")
    for box in browser.find_elements(By.CSS_SELECTOR, "[data-testid=compare-check]"):
        box.click()
    browser.find_element(By.CSS_SELECTOR, "[data-testid=compare-selected]").click()

    for chart in ("cost-vs-days-chart", "step-time-chart", "memory-chart"):
        WebDriverWait(browser, 15).until(partial(_inked, chart=chart))
        assert browser.execute_script(CANVAS_INK, chart) > 1000, chart  # drawn, not blank
    runs = list(EstimationRun.objects.filter(scenario__project=project))
    assert len(runs) == 3
    assert all(run.status == RunStatus.SUCCEEDED and run.budget for run in runs)
    cheapest = min(runs, key=lambda run: Decimal((run.budget or {})["cost"]["p50"]))
    fastest = min(runs, key=lambda run: (run.budget or {})["training_days"]["p50"])
    marked_cheapest = browser.find_element(By.CSS_SELECTOR, "[data-testid=cheapest]")
    marked_fastest = browser.find_element(By.CSS_SELECTOR, "[data-testid=fastest]")
    assert marked_cheapest.get_attribute("data-scenario-id") == str(cheapest.scenario_id)
    assert marked_fastest.get_attribute("data-scenario-id") == str(fastest.scenario_id)
    assert len(browser.find_elements(By.CSS_SELECTOR, "[data-testid=cheapest]")) == 1
    assert len(browser.find_elements(By.CSS_SELECTOR, "[data-testid=fastest]")) == 1
    browser.execute_script("window.scrollTo(0, 0)")
    screenshot("07-comparison")
    browser.execute_script(
        "document.querySelector('[data-testid=cost-vs-days-chart]').scrollIntoView()"
    )
    screenshot("08-comparison-charts")

    budget = _request_budget(browser, base, screenshot, cheapest, runs)
    _log_out(browser)
    _log_in(browser, base, "finn", "Finn Okafor")
    shown_hash = _approve(browser, screenshot, budget)
    _check_pdf(browser, base, budget, project, shown_hash)


def _request_budget(
    browser: WebDriver,
    base: str,
    screenshot: Screenshot,
    cheapest: EstimationRun,
    runs: list[EstimationRun],
) -> BudgetRequest:
    """Maya asks for the cheapest run's budget, compared with the other two, and submits it."""
    browser.get(f"{base}{cheapest.get_absolute_url()}")
    _click_through(browser, "[data-testid=request-budget]")
    ticked = browser.find_elements(By.CSS_SELECTOR, "input[name=alternatives]:checked")
    others = {str(run.pk) for run in runs if run.pk != cheapest.pk}
    assert {box.get_attribute("value") for box in ticked} == others
    _type(browser, "justification", "Cheapest of the three plans; finishes before the release.")
    preview = _css(browser, "[data-testid=amount-preview]").text  # type: ignore[attr-defined]
    assert preview.startswith("Amount requested:"), preview
    screenshot("09-budget-form")
    browser.execute_script("arguments[0].scrollIntoView()", ticked[0])
    screenshot("09-budget-form-alternatives")
    _click_through(browser, "[data-testid=save-budget]")
    state = browser.find_element(By.CSS_SELECTOR, "[data-testid=budget-state]")
    assert state.get_attribute("data-state") == BudgetState.DRAFT
    screenshot("10-budget-draft")
    _click_through(browser, "[data-testid=submit-budget]")
    state = browser.find_element(By.CSS_SELECTOR, "[data-testid=budget-state]")
    assert state.get_attribute("data-state") == BudgetState.SUBMITTED
    screenshot("11-budget-submitted")
    budget = BudgetRequest.objects.get(run=cheapest)
    assert {run.pk for run in budget.alternatives.all()} == {int(pk) for pk in others}
    return budget


def _approve(browser: WebDriver, screenshot: Screenshot, budget: BudgetRequest) -> str:
    """Finn opens his queue, reads the request and approves it; returns the hash shown."""
    _click_through(browser, "[data-testid=nav-budgets]")
    _click_through(browser, "[data-testid=tab-queue]")
    rows = browser.find_elements(By.CSS_SELECTOR, "[data-testid=budget-row]")
    assert [row.get_attribute("data-budget-id") for row in rows] == [str(budget.pk)]
    screenshot("12-approver-queue")
    _click_through(browser, f"[data-budget-id='{budget.pk}'] [data-testid=budget-link]")
    shown_hash = _css(browser, "[data-testid=snapshot-sha256]").text  # type: ignore[attr-defined]
    budget.refresh_from_db()
    assert shown_hash == budget.snapshot_sha256
    assert len(shown_hash) == 64
    assert len(browser.find_elements(By.CSS_SELECTOR, "[data-testid=comparison-row]")) == 3
    screenshot("13-approver-request")
    for part in ("budget-comparison", "budget-charts", "budget-assumptions"):
        section = browser.find_element(By.CSS_SELECTOR, f"[data-testid={part}]")
        browser.execute_script("arguments[0].scrollIntoView()", section)
        screenshot(f"13-approver-{part}")
    comment = browser.find_element(By.CSS_SELECTOR, "[data-testid=decision-comment]")
    comment.send_keys("Within the ceiling; approved for the summer release.")
    _click_through(browser, "[data-testid=approve-budget]")
    state = browser.find_element(By.CSS_SELECTOR, "[data-testid=budget-state]")
    assert state.get_attribute("data-state") == BudgetState.APPROVED
    assert state.text == "Approved"
    screenshot("14-budget-approved")
    events = browser.find_elements(By.CSS_SELECTOR, "[data-testid=timeline-event]")
    actions = [event.get_attribute("data-action") for event in events]
    assert actions == ["created", "submitted", "approved"]
    assert "Within the ceiling" in events[-1].text
    assert "Finn Okafor" in events[-1].text
    browser.execute_script("arguments[0].scrollIntoView()", events[0])
    screenshot("15-budget-timeline")
    budget.refresh_from_db()
    assert budget.state == BudgetState.APPROVED
    return shown_hash


def _check_pdf(
    browser: WebDriver, base: str, budget: BudgetRequest, project: Project, shown_hash: str
) -> None:
    """Download the sign-off PDF with the browser's session and read it back."""
    from pypdf import PdfReader

    link = browser.find_element(By.CSS_SELECTOR, "[data-testid=download-pdf]")
    href = link.get_attribute("href") or ""
    assert href.startswith(base)
    cookies = {cookie["name"]: cookie["value"] for cookie in browser.get_cookies()}
    session = {"Cookie": f"sessionid={cookies['sessionid']}"}
    request = urllib.request.Request(href, headers=session)  # noqa: S310 (the live server)
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
        assert response.headers["Content-Type"] == "application/pdf"
        assert "attachment" in response.headers["Content-Disposition"]
        body = response.read()
    assert body.startswith(b"%PDF")
    (ARTIFACTS / f"{JOURNEY}-16-signoff.pdf").write_bytes(body)  # for reviewers, beside the PNGs
    text = "\n".join(page.extract_text() for page in PdfReader(io.BytesIO(body)).pages)
    assert project.name in text
    assert shown_hash in text.replace("\n", "")
