"""A capacity plan in real Chromium, from the question to a run that costs what it said.

Maya asks which clusters train Llama 3 8B on 1 T tokens within about 90 days and a budget,
on the newest published price book, for a project of her organisation. The plan is saved and
searched by the workers (eagerly in the embedded mode, through Redis to a real Celery worker
when PostgreSQL and Redis are set); the plan page follows it live and reloads itself when it
is done. She turns the cheapest feasible option into a scenario, runs that scenario, and the
run's deterministic cost is the option's cost, to the cent: a plan's option and a run of the
scenario made from it cost the same.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.utils import timezone
from pytest_django.live_server_helper import LiveServer
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import Select, WebDriverWait

from organisations.demo import demo_organisation
from planner.capacity.models import CapacityPlan, PlanStatus
from planner.demo import demo_users_load
from planner.scenarios.models import EstimationRun, Project, RunStatus, Scenario
from planner.scenarios.prices import price_describe
from planner.scenarios.services import project_create
from pricing.demo import pricing_demo_load
from pricing.models import PriceBook
from tests.conftest import page_replaced

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PLAN_TIMEOUT_S = 120
RUN_TIMEOUT_S = 90
CURRENCY = "USD"
BUDGET = "500000"
MAX_GPUS = 256
PLAN_URL = re.compile(r"/capacity/(\d+)/$")
Screenshot = Callable[[str], Path]


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


def _set_date(browser: WebDriver, name: str, iso: str) -> None:
    """Fill an ``<input type=date>``: what a user types into it depends on the locale, so set
    the value it submits (always yyyy-mm-dd) as the picker does, events included."""
    field = browser.find_element(By.NAME, name)
    browser.execute_script(
        "arguments[0].value = arguments[1];"
        "arguments[0].dispatchEvent(new Event('input', {bubbles: true}));"
        "arguments[0].dispatchEvent(new Event('change', {bubbles: true}));",
        field,
        iso,
    )
    assert field.get_property("value") == iso


def _status(browser: WebDriver, testid: str) -> str:
    badge = browser.find_element(By.CSS_SELECTOR, f"[data-testid={testid}]")
    return badge.get_attribute("data-status") or ""


def _wait_for_plan(browser: WebDriver) -> None:
    """Wait until the plan page, reloaded by its progress script, shows a finished plan."""
    WebDriverWait(
        browser,
        PLAN_TIMEOUT_S,
        poll_frequency=0.25,
        ignored_exceptions=(NoSuchElementException, StaleElementReferenceException),
    ).until(
        lambda driver: (
            not driver.find_elements(By.CSS_SELECTOR, "[data-testid=live-progress]")
            and _status(driver, "plan-status") in PlanStatus.values
        )
    )


def _wait_for_run(browser: WebDriver) -> None:
    """The run page polls status.json and reloads itself when the run finishes."""
    WebDriverWait(
        browser,
        RUN_TIMEOUT_S,
        poll_frequency=0.25,
        ignored_exceptions=(NoSuchElementException, StaleElementReferenceException),
    ).until(lambda driver: _status(driver, "run-status") in (RunStatus.SUCCEEDED, RunStatus.FAILED))
    assert _status(browser, "run-status") == RunStatus.SUCCEEDED, browser.page_source[-3000:]


def _ask(browser: WebDriver, base: str, project: Project, book: PriceBook, deadline: str) -> None:
    browser.get(f"{base}/capacity/")
    Select(browser.find_element(By.NAME, "model_preset")).select_by_value("llama3-8b")
    _type(browser, "tokens", "1T")
    _set_date(browser, "deadline", deadline)
    _type(browser, "budget", BUDGET)
    _type(browser, "currency", CURRENCY)
    _type(browser, "max_gpus", str(MAX_GPUS))
    Select(browser.find_element(By.NAME, "book")).select_by_value(str(book.pk))
    Select(browser.find_element(By.NAME, "project")).select_by_value(str(project.pk))


def test_a_plans_option_and_a_run_of_its_scenario_cost_the_same(
    live_server: LiveServer,
    browser: WebDriver,
    screenshot: Screenshot,
    request: pytest.FixtureRequest,
) -> None:
    if not settings.CELERY_TASK_ALWAYS_EAGER:
        request.getfixturevalue("celery_worker")  # the plan's chunks really go through Redis
    pricing_demo_load()
    demo_users_load()  # maya is a requester of the demo organisation
    maya = User.objects.get(username="maya")
    project = project_create(
        user=maya,
        organisation=demo_organisation(),
        name="Llama 3 8B on 1T tokens",
        currency=CURRENCY,
    )
    book = (
        PriceBook.objects.filter(status=PriceBook.Status.PUBLISHED).order_by("-fetched_at").first()
    )
    assert book is not None, "the pricing demo publishes a book"
    deadline = (timezone.localdate() + timedelta(days=90)).isoformat()
    base = live_server.url

    # Maya asks the question.
    _log_in(browser, base)
    _ask(browser, base, project, book, deadline)
    screenshot("01-question")
    _click_through(browser, browser.find_element(By.CSS_SELECTOR, "[data-testid=plan-submit]"))

    # The plan page: queued or running with its live progress, or (a fast worker) finished.
    match = PLAN_URL.search(browser.current_url)
    assert match, browser.current_url
    plan = CapacityPlan.objects.get(pk=int(match.group(1)))
    assert (plan.created_by, plan.project, plan.currency) == (maya, project, CURRENCY)
    assert plan.inputs["book"] == book.pk
    assert plan.inputs["max_gpus"] == MAX_GPUS
    assert plan.deadline.isoformat() == deadline
    assert _status(browser, "plan-status") in PlanStatus.values
    progress = browser.find_elements(By.CSS_SELECTOR, "[data-testid=live-progress]")
    if _status(browser, "plan-status") in (PlanStatus.QUEUED, PlanStatus.RUNNING):
        assert progress, "a plan not yet finished shows its live progress"
        assert progress[0].find_element(By.CSS_SELECTOR, "[data-testid=progress-bar]")
        screenshot("02-plan-searching")
    else:
        assert not progress
    _wait_for_plan(browser)  # no reload here: the progress script reloads the page
    assert _status(browser, "plan-status") == PlanStatus.SUCCEEDED, browser.page_source[-3000:]
    plan.refresh_from_db()
    assert plan.status == PlanStatus.SUCCEEDED
    assert browser.find_element(By.CSS_SELECTOR, "[data-testid=verdict]").is_displayed()
    screenshot("03-plan-succeeded")

    # The feasible options, cheapest first; she makes the first one a scenario.
    rows = browser.find_elements(By.CSS_SELECTOR, "[data-testid=feasible-row]")
    assert rows, "1T tokens of Llama 3 8B in 90 days fit on some cluster of at most 256 GPUs"
    costs = [Decimal(row.get_attribute("data-cost") or "") for row in rows]
    assert costs == sorted(costs)
    first = rows[0]
    accelerator = first.get_attribute("data-accelerator")
    gpus = int(first.get_attribute("data-gpus") or "")
    cost = first.get_attribute("data-cost") or ""
    assert 0 < gpus <= MAX_GPUS
    assert Decimal(cost) <= Decimal(BUDGET)
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", first)
    screenshot("04-plan-options")
    choice = Select(first.find_element(By.NAME, "project"))
    assert choice.first_selected_option.get_attribute("value") == str(project.pk)
    _click_through(browser, first.find_element(By.CSS_SELECTOR, "[data-testid=make-scenario]"))

    # The scenario holds the option's cluster, layout and price.
    scenario = Scenario.objects.get(project=project)
    assert browser.current_url.endswith(scenario.get_absolute_url())
    assert scenario.spec["cluster"] == {"accelerator": accelerator, "num_gpus": gpus}
    layout = scenario.spec["parallelism"]
    assert isinstance(layout, dict), layout  # the layout the plan found, not "auto"
    point = next(
        p
        for p in (plan.result or {})["feasible"]
        if p["num_gpus"] == gpus and plan.options[p["option"]]["accelerator"] == accelerator
    )
    assert layout == point["parallelism"]
    option = plan.options[point["option"]]
    assert scenario.price is not None
    price = price_describe(scenario.price)
    assert price.key == option["key"]  # the option's own price record
    assert price.currency == option["original_currency"] == plan.currency == CURRENCY
    screenshot("05-scenario")

    # She runs it: the run's deterministic cost is the option's.
    _click_through(browser, browser.find_element(By.CSS_SELECTOR, "[data-testid=run-button]"))
    assert "/runs/" in browser.current_url
    _wait_for_run(browser)
    run = EstimationRun.objects.get(scenario=scenario)
    assert run.status == RunStatus.SUCCEEDED
    assert run.budget is not None
    assert run.budget["currency"] == CURRENCY
    assert run.budget["cost"]["deterministic"] == cost
    screenshot("06-run")

    # The list of saved plans shows hers, succeeded.
    browser.get(f"{base}/capacity/")
    row = browser.find_element(By.CSS_SELECTOR, "[data-testid=plan-row]")
    assert row.find_element(By.CSS_SELECTOR, "a").get_attribute("href") == (
        f"{base}{plan.get_absolute_url()}"
    )
    assert row.find_element(By.CSS_SELECTOR, ".status.succeeded")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", row)
    screenshot("07-plan-list")
