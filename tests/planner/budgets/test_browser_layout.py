"""The budget request page on a phone: nothing is cut off and the page never scrolls sideways.

Wide tables (the comparison of runs, the whole run by part) scroll inside their own box, so a
390-px-wide screen (an iPhone 12 to 15) shows every column by swiping the table, not the page.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from pytest_django.live_server_helper import LiveServer
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from organisations.models import Organisation
from planner.budgets.models import BudgetRequest
from planner.budgets.services import budget_request_create, budget_request_submit
from planner.scenarios.models import EstimationRun, Project, Scenario
from planner.scenarios.services import project_create, run_execute, run_start, scenario_create
from tests.planner.conftest import list_price, small_spec
from tests.planner.scenarios.test_browser_dates import _log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = (390, 844)

#: The elements whose right edge passes the viewport's and that no scrolling box holds.
OVERFLOWING_JS = """
const width = document.documentElement.clientWidth;
const held = (el) => {
  for (let up = el.parentElement; up; up = up.parentElement) {
    const x = getComputedStyle(up).overflowX;
    if (x === 'auto' || x === 'scroll' || x === 'hidden') return true;
  }
  return false;
};
return [...document.body.querySelectorAll('*')]
  .filter((el) => el.getBoundingClientRect().right > width + 0.5 && !held(el))
  .slice(0, 10)
  .map((el) => `${el.tagName}.${el.className} ${Math.round(el.getBoundingClientRect().right)}`
    + ` ${(el.closest('[data-testid]') || el).dataset.testid} ${el.textContent.slice(0, 40)}`);
"""


@pytest.fixture
def phone(browser: WebDriver) -> Iterator[WebDriver]:
    """The session's browser at a phone's size; the desktop size comes back afterwards."""
    before = browser.get_window_size()
    browser.set_window_size(*PHONE)
    yield browser
    browser.set_window_size(before["width"], before["height"])


def _finished_run(user: User, scenario: Scenario) -> EstimationRun:
    run = run_start(user=user, scenario=scenario, seed=11, samples=200)
    run_execute(run_id=run.pk)  # again where the embedded mode already ran it: a no-op
    run.refresh_from_db()
    assert run.status == "succeeded", run.error
    return run


def _submitted_request(user: User, organisation: Organisation) -> BudgetRequest:
    project: Project = project_create(
        user=user, organisation=organisation, name="Llama 3 8B pre-training", currency="USD"
    )
    runs = [
        _finished_run(
            user,
            scenario_create(
                user=user,
                project=project,
                name=f"{accelerator} at the GCP list price, a long scenario name",
                spec=small_spec(accelerator, 64),
                price_source="price_entry",
                price=list_price(accelerator),
                model_preset="llama3-8b",
            ),
        )
        for accelerator in ("H100-SXM", "A100-80GB-SXM", "TPU-v5p")
    ]
    draft = budget_request_create(
        user=user,
        run=runs[0],
        title="Llama 3 8B on 64 H100 SXM accelerators for the summer release",
        justification="Cheapest plan that meets the summer release.",
        alternatives=runs[1:],
    )
    return budget_request_submit(user=user, request=draft)


def _scroll_widths(browser: WebDriver, selector: str) -> dict[str, Any]:
    return dict(
        browser.execute_script(
            "const box = document.querySelector(arguments[0]).closest('.scroll');"
            "return {box: box.clientWidth, content: box.scrollWidth,"
            " overflow: getComputedStyle(box).overflowX};",
            selector,
        )
    )


def test_the_budget_request_page_fits_a_phone_and_its_tables_scroll_in_their_box(
    live_server: LiveServer,
    phone: WebDriver,
    screenshot: Callable[[str], Path],
    prices: None,
    requester: User,
    organisation: Organisation,
) -> None:
    budget = _submitted_request(requester, organisation)
    _log_in(phone, live_server.url, requester)
    phone.get(live_server.url + budget.get_absolute_url())
    comparison = phone.find_element(By.CSS_SELECTOR, "[data-testid=budget-comparison]")
    screenshot("phone")
    phone.execute_script("arguments[0].scrollIntoView()", comparison)
    screenshot("phone-comparison")
    # The viewport less any vertical scroll bar: what the page may fill without scrolling.
    viewport = phone.execute_script("return document.documentElement.clientWidth")
    assert viewport <= PHONE[0]
    page_width = phone.execute_script("return document.documentElement.scrollWidth")
    assert page_width <= viewport, phone.execute_script(OVERFLOWING_JS)
    assert phone.execute_script(OVERFLOWING_JS) == []
    for table in ("[data-testid=budget-comparison]", "[data-testid=budget-whole-run]"):
        widths = _scroll_widths(phone, table)
        assert widths["overflow"] == "auto", table
        assert widths["box"] <= viewport, table
        assert widths["content"] > widths["box"], f"{table} is not wider than its box: {widths}"


def test_the_does_not_fit_badge_shows_whole(
    live_server: LiveServer,
    browser: WebDriver,
    prices: None,
    requester: User,
    organisation: Organisation,
) -> None:
    budget = _submitted_request(requester, organisation)
    _log_in(browser, live_server.url, requester)
    browser.get(live_server.url + budget.get_absolute_url())
    badges = browser.find_elements(By.CSS_SELECTOR, "[data-testid=budget-comparison] .badge")
    assert badges
    for badge in badges:
        clipped = browser.execute_script(
            "const el = arguments[0]; return el.scrollWidth > el.clientWidth + 1;", badge
        )
        assert not clipped, badge.text
