"""Comparing scenarios of two projects in the real browser: pick them, read the table."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from selenium.webdriver.common.by import By

from organisations.models import Organisation, Role
from organisations.services import membership_grant, organisation_create
from planner.scenarios.models import EstimationRun, Project, RunStatus, Scenario
from planner.scenarios.services import project_create, run_start, scenario_create
from pricing.demo import pricing_demo_load
from tests.planner.conftest import list_price, small_spec
from tests.services import wait_for

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RUN_TIMEOUT_S = 90


def _finished(run: EstimationRun) -> EstimationRun:
    """The run once done: at once in the embedded mode, from the real worker otherwise."""

    def done() -> bool:
        run.refresh_from_db()
        return run.status in (RunStatus.SUCCEEDED, RunStatus.FAILED)

    wait_for(done, RUN_TIMEOUT_S, f"run {run.pk} to finish")
    return run


def _estimated(user: User, project: Project, name: str, gpus: int) -> Scenario:
    scenario = scenario_create(
        user=user, project=project, name=name, spec=small_spec("H100-SXM", gpus),
        price_source="price_entry", price=list_price("H100-SXM"), model_preset="llama3-8b",
    )  # fmt: skip
    run = _finished(run_start(user=user, scenario=scenario, seed=7, samples=400))
    assert run.status == RunStatus.SUCCEEDED, run.error
    return scenario


def _member_of_two(username: str) -> tuple[User, list[Organisation]]:
    user = User.objects.create_user(username, password=f"{username}-pass")
    organisations = [organisation_create(name=name) for name in ("Acme AI", "Globex Labs")]
    for organisation in organisations:
        membership_grant(organisation=organisation, user=user, role=Role.REQUESTER)
    return user, organisations


def test_a_user_compares_scenarios_of_two_organisations(
    live_server, browser, screenshot, request: pytest.FixtureRequest
) -> None:
    if not settings.CELERY_TASK_ALWAYS_EAGER:
        request.getfixturevalue("celery_worker")  # runs really go through Redis to a worker
    pricing_demo_load()
    user, (acme, globex) = _member_of_two("maya")
    ours = project_create(user=user, organisation=acme, name="Acme 8B")
    theirs = project_create(user=user, organisation=globex, name="Globex 8B")
    chosen = [_estimated(user, ours, "Big cluster", 256), _estimated(user, theirs, "Small", 64)]

    browser.get(f"{live_server.url}/accounts/login/")
    browser.find_element(By.ID, "id_username").send_keys("maya")
    browser.find_element(By.ID, "id_password").send_keys("maya-pass")
    browser.find_element(By.CSS_SELECTOR, "form.form button[type=submit]").click()
    browser.find_element(By.CSS_SELECTOR, "[data-testid=current-user]")
    browser.get(f"{live_server.url}/compare/")
    for scenario in chosen:
        browser.find_element(
            By.CSS_SELECTOR, f"input[name=scenario][value='{scenario.pk}']"
        ).click()
    screenshot("picker")
    browser.find_element(By.CSS_SELECTOR, "[data-testid=compare-picker] button").click()

    rows = browser.find_elements(By.CSS_SELECTOR, "[data-testid=comparison-row]")
    assert [row.get_attribute("data-scenario-id") for row in rows] == [str(s.pk) for s in chosen]
    projects = browser.find_elements(By.CSS_SELECTOR, "[data-testid=project-name]")
    assert [p.text for p in projects] == ["Acme 8B", "Globex 8B"]
    note = browser.find_element(By.CSS_SELECTOR, "[data-testid=like-for-like]")
    assert "Cluster sizes differ: 256 vs 64 GPUs" in note.text
    screenshot("comparison")
