"""The Content-Security-Policy: every page sends it, and nothing on the pages breaks it.

The policy allows scripts and styles from this origin only: no inline <script>, no style=""
attribute, no on*= handler. Browser tests fail on any violation Chromium logs (tests/conftest.py);
the browser tests here prove that detector works and that the pages it guards still render.
"""

from __future__ import annotations

import re
from decimal import Decimal
from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from pytest_django.live_server_helper import LiveServer
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from organisations.models import Organisation
from planner.scenarios.models import Scenario
from planner.scenarios.services import project_create, run_execute, run_start, scenario_create
from tests.conftest import csp_violations
from tests.planner.conftest import list_price, small_spec
from tests.planner.scenarios.test_browser_dates import _log_in

EXPECTED_POLICY = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    "img-src": "'self' data:",
    "font-src": "'self'",
    "connect-src": "'self'",
    "object-src": "'none'",
    "base-uri": "'self'",
    "form-action": "'self'",
    "frame-ancestors": "'none'",
}
TEMPLATES = Path(settings.BASE_DIR) / "templates"
#: Rendered by WeasyPrint into a PDF, never served to a browser: it keeps its <style> block.
PDF_TEMPLATES = {"budgets/signoff_pdf.html"}
EVENT_HANDLER = re.compile(r"on[a-z]+")


def _policy(header: str) -> dict[str, str]:
    policy = {}
    for directive in header.split(";"):
        name, _, value = directive.strip().partition(" ")
        policy[name] = value
    return policy


class _InlineCode(HTMLParser):
    """Collects what the policy would refuse: inline scripts, <style>, style="" and on*=."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = dict(attrs)
        if tag == "script" and "src" not in names and names.get("type") != "application/json":
            self.found.append(f"inline <script> {names}")
        if tag == "style":
            self.found.append("<style> element")
        # An event handler has a value; a bare word such as a template tag's `only` has none.
        self.found += [
            f"{name}= on <{tag}>"
            for name, value in attrs
            if name == "style" or (EVENT_HANDLER.fullmatch(name) and value is not None)
        ]


def _inline_code(html: str) -> list[str]:
    parser = _InlineCode()
    parser.feed(html)
    return parser.found


@pytest.fixture
def finished_scenario(prices: None, requester: User, organisation: Organisation) -> Scenario:
    """A scenario with a finished run, in a project with a budget ceiling (the dashboard meter)."""
    project = project_create(
        user=requester,
        organisation=organisation,
        name="Llama 3 8B pre-training",
        budget_ceiling=Decimal("2000000"),
    )
    scenario = scenario_create(
        user=requester,
        project=project,
        name="H100 at the list price",
        spec=small_spec("H100-SXM", 64),
        price_source="price_entry",
        price=list_price("H100-SXM"),
        model_preset="llama3-8b",
    )
    run = run_start(user=requester, scenario=scenario, seed=11, samples=200)
    run_execute(run_id=run.pk)  # a no-op where the embedded mode already ran it
    return scenario


@pytest.mark.django_db
def test_it_sends_the_policy_on_pages_and_errors(client: Client) -> None:
    for url in ("/", reverse("login"), reverse("api-docs"), "/no-such-page/"):
        response = client.get(url)
        assert _policy(response.headers["Content-Security-Policy"]) == EXPECTED_POLICY, url


@pytest.mark.django_db
def test_it_sends_the_policy_to_a_signed_in_user(
    client: Client, requester: User, finished_scenario: Scenario
) -> None:
    client.force_login(requester)
    for url in ("/", finished_scenario.get_absolute_url()):
        response = client.get(url)
        assert response.status_code == 200, url
        assert _policy(response.headers["Content-Security-Policy"]) == EXPECTED_POLICY, url
        assert _inline_code(response.content.decode()) == [], url


def test_the_policy_is_enforced_and_allows_no_inline_code_or_eval() -> None:
    values = str(settings.SECURE_CSP)
    assert "'unsafe-inline'" not in values
    assert "'unsafe-eval'" not in values
    assert "nonce" not in values
    assert not settings.SECURE_CSP_REPORT_ONLY  # blocked, not only reported


@pytest.mark.parametrize(
    "template",
    sorted(
        str(path.relative_to(TEMPLATES))
        for path in TEMPLATES.rglob("*.html")
        if str(path.relative_to(TEMPLATES)) not in PDF_TEMPLATES
    ),
)
def test_the_templates_hold_no_inline_script_or_style(template: str) -> None:
    # Template tags inside attributes confuse no HTML parser: {% %} and {{ }} are plain text.
    source = (TEMPLATES / template).read_text()
    assert _inline_code(re.sub(r"{#.*?#}", "", source)) == []


@pytest.mark.django_db
def test_the_api_docs_page_runs_no_inline_code(client: Client) -> None:
    response = client.get(reverse("api-docs"))
    html = response.content.decode()
    assert _inline_code(html) == []
    assert "api/swagger_ui.js" in html


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_browser_reports_what_the_policy_refuses(
    live_server: LiveServer, browser: WebDriver
) -> None:
    browser.get(f"{live_server.url}{reverse('login')}")
    browser.execute_script(
        "const script = document.createElement('script');"
        "script.textContent = 'window.inlineScriptRan = true;';"
        "document.body.appendChild(script);"
        "document.body.setAttribute('style', 'background: red');"
    )
    violations = csp_violations(browser)  # read here, so the check after the test sees none
    assert browser.execute_script("return window.inlineScriptRan === true") is False
    # Chromium's words vary by version ("Refused to execute inline script because it violates",
    # "Executing inline script violates"); the directive it names does not.
    assert any("inline script" in line and "script-src" in line for line in violations), violations
    assert any("inline style" in line and "style-src" in line for line in violations), violations


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_bars_keep_their_widths_without_style_attributes(
    live_server: LiveServer, browser: WebDriver, requester: User, finished_scenario: Scenario
) -> None:
    _log_in(browser, live_server.url, requester)
    meter = browser.find_element(By.CSS_SELECTOR, ".meter > svg")
    assert meter.rect["width"] > 0
    browser.get(live_server.url + finished_scenario.get_absolute_url())
    for label in ("Step-time breakdown", "Memory per"):
        stack = browser.find_element(By.CSS_SELECTOR, f".stack[aria-label^='{label}']")
        parts = stack.find_elements(By.CSS_SELECTOR, "svg")
        assert parts, label
        assert sum(part.rect["width"] for part in parts) > stack.rect["width"] / 10, label


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_api_docs_start_swagger_ui_under_the_policy(
    live_server: LiveServer, browser: WebDriver
) -> None:
    browser.get(f"{live_server.url}{reverse('api-docs')}")
    # Swagger UI lists the operations once the start-up script fetched the schema.
    assert browser.find_elements(By.CSS_SELECTOR, "#swagger-ui .opblock")
    assert browser.find_element(By.CSS_SELECTOR, "#swagger-ui .info .title").text.startswith(
        "TrainPlan API"
    )


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_admin_and_the_browsable_api_work_under_the_policy(
    live_server: LiveServer, browser: WebDriver
) -> None:
    admin = User.objects.create_superuser("ada", password="ada-pass")
    browser.get(f"{live_server.url}{reverse('admin:login')}")
    browser.find_element(By.ID, "id_username").send_keys(admin.username)
    browser.find_element(By.ID, "id_password").send_keys("ada-pass")
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    browser.find_element(By.ID, "user-tools")
    # The change form runs the admin's widget scripts (the permission pickers, the calendar).
    browser.get(f"{live_server.url}{reverse('admin:auth_user_change', args=[admin.pk])}")
    assert browser.find_elements(By.CSS_SELECTOR, ".selector-available")
    # DRF's pages, a list with its Filters button among them (templates/rest_framework/api.html).
    browser.get(f"{live_server.url}{reverse('api-root')}")
    browser.find_element(By.CSS_SELECTOR, "a[href$='/api/v1/projects/']").click()
    assert browser.find_element(By.CSS_SELECTOR, "[data-target='#filtersModal']").is_displayed()
