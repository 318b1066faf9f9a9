"""Guards where money is committed, in real Chromium.

Maya runs a scenario that cannot fit in memory (Llama 3 70B on one node of H100s) at a price
the book flags as suspect. The run page gives "Does not fit in memory" as the run's state,
marks its figures not achievable and offers no budget request (the form's address sends her
back with the reason). She requests the budget from a scenario that fits, at the same flagged
price. Finn, the approver, sees the flagged-price warning above the Approve button, approves
with it in view, and the sign-off PDF and XLSX he downloads carry it too.
"""

from __future__ import annotations

import io
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.urls import reverse
from openpyxl import load_workbook
from pypdf import PdfReader
from pytest_django.live_server_helper import LiveServer
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from organisations.demo import demo_organisation
from organisations.models import Role
from organisations.services import membership_grant
from planner.budgets.models import BudgetRequest, BudgetState
from planner.demo import demo_users_load
from planner.scenarios.models import EstimationRun, RunStatus, Scenario
from planner.scenarios.services import project_create, scenario_create
from pricing.demo import pricing_demo_load
from pricing.models import PriceEntry
from tests.conftest import ARTIFACTS, page_replaced
from tests.planner.conftest import small_spec, too_big_spec

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RUN_TIMEOUT_S = 90
NAME = "test_browser_budget_guards"
Screenshot = Callable[[str], Path]


def _type(browser: WebDriver, name: str, text: str) -> None:
    field = browser.find_element(By.NAME, name)
    field.clear()
    field.send_keys(text)


def _log_in(browser: WebDriver, base: str, username: str) -> None:
    browser.get(f"{base}/accounts/login/")
    _type(browser, "username", username)
    _type(browser, "password", f"{username}-demo-pass")
    browser.find_element(By.CSS_SELECTOR, "form.form button[type=submit]").click()
    browser.find_element(By.CSS_SELECTOR, "[data-testid=current-user]")


def _log_out(browser: WebDriver) -> None:
    browser.find_element(By.CSS_SELECTOR, "header form[action$='/logout/'] button").click()
    WebDriverWait(browser, 10).until(
        lambda driver: not driver.find_elements(By.CSS_SELECTOR, "[data-testid=current-user]")
    )


def _click_through(browser: WebDriver, selector: str) -> None:
    page = browser.find_element(By.TAG_NAME, "html")
    browser.find_element(By.CSS_SELECTOR, selector).click()
    WebDriverWait(browser, 15).until(page_replaced(page))


def _wait_until_finished(browser: WebDriver, status: str = RunStatus.SUCCEEDED) -> None:
    WebDriverWait(
        browser,
        RUN_TIMEOUT_S,
        poll_frequency=0.25,
        ignored_exceptions=(NoSuchElementException, StaleElementReferenceException),
    ).until(
        lambda driver: (
            driver.find_element(By.CSS_SELECTOR, "[data-testid=run-status]").get_attribute(
                "data-status"
            )
            in (RunStatus.SUCCEEDED, RunStatus.FAILED, "does_not_fit")
        )
    )
    badge = browser.find_element(By.CSS_SELECTOR, "[data-testid=run-status]")
    assert badge.get_attribute("data-status") == status


def _download(browser: WebDriver, base: str, testid: str) -> bytes:
    """A pack file, fetched with the browser's session from the link the page shows."""
    href = browser.find_element(By.CSS_SELECTOR, f"[data-testid={testid}]").get_attribute("href")
    assert href is not None
    assert href.startswith(base)
    cookies = {cookie["name"]: cookie["value"] for cookie in browser.get_cookies()}
    request = urllib.request.Request(  # noqa: S310 (the live server)
        href, headers={"Cookie": f"sessionid={cookies['sessionid']}"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
        return bytes(response.read())


def _scenarios(flagged: PriceEntry) -> tuple[Scenario, Scenario]:
    """The 70B scenario that does not fit, and an 8B one that does, both at ``flagged``."""
    demo_users_load()
    maya, finn = User.objects.get(username="maya"), User.objects.get(username="finn")
    organisation = demo_organisation()  # the one the demo users and quote belong to
    membership_grant(organisation=organisation, user=maya, role=Role.REQUESTER)
    membership_grant(organisation=organisation, user=finn, role=Role.APPROVER)
    project = project_create(
        user=maya, organisation=organisation, name="Llama 3 70B on one node", currency="USD"
    )
    too_big = scenario_create(
        user=maya,
        project=project,
        name="70B on 8 H100 (flagged price)",
        spec=too_big_spec(),
        price_source="price_entry",
        price=flagged,
        model_preset="llama3-70b",
    )
    fits = scenario_create(
        user=maya,
        project=project,
        name="8B on 8 H100 (flagged price)",
        spec=small_spec("H100-SXM", 8, tokens=1e9),
        price_source="price_entry",
        price=flagged,
        model_preset="llama3-8b",
    )
    return too_big, fits


def test_a_run_that_does_not_fit_and_a_flagged_price_reach_the_approver(
    live_server: LiveServer,
    browser: WebDriver,
    screenshot: Screenshot,
    request: pytest.FixtureRequest,
) -> None:
    if not settings.CELERY_TASK_ALWAYS_EAGER:
        request.getfixturevalue("celery_worker")  # the run really goes through Redis
    pricing_demo_load()
    flagged = (
        PriceEntry.objects.filter(accelerator__catalog_id="H100-SXM")
        .exclude(data_flag="")
        .select_related("provider")
        .first()
    )
    assert flagged is not None, "the demo book flags an H100 price"
    too_big, fits = _scenarios(flagged)
    base = live_server.url

    # Maya runs the 70B: its state is "Does not fit in memory" and no budget is offered.
    _log_in(browser, base, "maya")
    browser.get(f"{base}{too_big.get_absolute_url()}")
    browser.find_element(By.CSS_SELECTOR, "[data-testid=run-button]").click()
    WebDriverWait(browser, 15).until(lambda driver: "/runs/" in driver.current_url)
    _wait_until_finished(browser, "does_not_fit")
    status = browser.find_element(By.CSS_SELECTOR, "[data-testid=run-status]")
    assert status.text == "Does not fit in memory"
    guards = browser.find_element(By.CSS_SELECTOR, "[data-testid=run-guards]")
    assert "does not fit in memory" in guards.text.lower()
    assert not browser.find_elements(By.CSS_SELECTOR, "[data-testid=request-budget]")
    refused = browser.find_element(By.CSS_SELECTOR, "[data-testid=request-budget-refused]")
    assert refused.get_attribute("aria-disabled") == "true"
    reason = browser.find_element(By.CSS_SELECTOR, "[data-testid=budget-refusal]").text
    assert "not achievable" in reason
    assert browser.find_element(By.CSS_SELECTOR, "[data-testid=figures-not-achievable]")
    screenshot("01-run-does-not-fit")
    run = EstimationRun.objects.get(scenario=too_big)
    browser.get(f"{base}{reverse('planner:budget-create', args=[run.pk])}")  # its form: refused
    WebDriverWait(browser, 15).until(
        lambda driver: driver.current_url == f"{base}{run.get_absolute_url()}"
    )
    assert "not achievable" in browser.find_element(By.CSS_SELECTOR, ".messages").text
    assert not BudgetRequest.objects.exists()

    # She requests the budget from the 8B that fits, at the same flagged price.
    browser.get(f"{base}{fits.get_absolute_url()}")
    browser.find_element(By.CSS_SELECTOR, "[data-testid=run-button]").click()
    WebDriverWait(browser, 15).until(lambda driver: "/runs/" in driver.current_url)
    _wait_until_finished(browser)
    _click_through(browser, "[data-testid=request-budget]")
    form_guards = browser.find_element(By.CSS_SELECTOR, "[data-testid=form-guards]")
    assert flagged.data_flag in form_guards.text
    _type(browser, "justification", "The fine-tune finance asked for.")
    _click_through(browser, "[data-testid=save-budget]")
    _click_through(browser, "[data-testid=submit-budget]")
    budget = BudgetRequest.objects.get()
    assert budget.state == BudgetState.SUBMITTED
    _log_out(browser)

    # Finn sees the warning above the Approve button, then approves.
    _log_in(browser, base, "finn")
    browser.get(f"{base}{budget.get_absolute_url()}")
    warnings = browser.find_element(By.CSS_SELECTOR, "[data-testid=decision-warnings]")
    codes = [
        item.get_attribute("data-code")
        for item in warnings.find_elements(By.CSS_SELECTOR, "[data-testid=guard]")
    ]
    assert "price_flagged" in codes
    assert flagged.data_flag in warnings.text
    approve = browser.find_element(By.CSS_SELECTOR, "[data-testid=approve-budget]")
    assert warnings.location["y"] < approve.location["y"]  # read before the button
    browser.execute_script("arguments[0].scrollIntoView()", warnings)
    screenshot("03-approver-warnings")
    browser.find_element(By.CSS_SELECTOR, "[data-testid=decision-comment]").send_keys(
        "Approved; the price is flagged, check it before spending."
    )
    _click_through(browser, "[data-testid=approve-budget]")
    budget.refresh_from_db()
    assert budget.state == BudgetState.APPROVED

    # The pack he files carries the warnings and the flag.
    pdf = _download(browser, base, "download-pdf")
    (ARTIFACTS / f"{NAME}-signoff.pdf").write_bytes(pdf)
    text = " ".join(page.extract_text() for page in PdfReader(io.BytesIO(pdf)).pages)
    text = " ".join(text.split())
    assert flagged.data_flag in text
    book = load_workbook(io.BytesIO(_download(browser, base, "download-xlsx")))
    cells = [
        str(cell.value) for sheet in book.worksheets for row in sheet.iter_rows() for cell in row
    ]
    assert any(flagged.data_flag in cell for cell in cells)
