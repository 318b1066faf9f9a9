"""Dates round-trip through a real browser: editing a project keeps its deadline.

Chromium's ``<input type="date">`` accepts only ``yyyy-mm-dd``; a page that wrote the date in
the locale's format (``22/04/2027`` under en-gb) showed an empty picker, and saving any other
change stored "no deadline".
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from pytest_django.live_server_helper import LiveServer
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from organisations.models import Organisation
from planner.scenarios.models import Project
from planner.scenarios.services import project_create
from tests.conftest import page_replaced

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DEADLINE = date(2027, 4, 22)


def _log_in(browser: WebDriver, base: str, user: User) -> None:
    browser.get(f"{base}/accounts/login/")
    browser.find_element(By.ID, "id_username").send_keys(user.username)
    browser.find_element(By.ID, "id_password").send_keys(f"{user.username}-pass")
    browser.find_element(By.CSS_SELECTOR, "form.form button[type=submit]").click()
    browser.find_element(By.CSS_SELECTOR, "[data-testid=current-user]")


def test_editing_only_the_name_keeps_the_deadline(
    live_server: LiveServer,
    browser: WebDriver,
    screenshot: Callable[[str], Path],
    requester: User,
    organisation: Organisation,
) -> None:
    project = project_create(
        user=requester,
        organisation=organisation,
        name="Llama 3 8B",
        deadline=DEADLINE,
        currency="USD",
    )
    base = live_server.url
    _log_in(browser, base, requester)
    browser.get(base + reverse("planner:project-edit", args=[project.pk]))
    picker = browser.find_element(By.NAME, "deadline")
    assert picker.get_property("value") == DEADLINE.isoformat()  # the picker shows it
    name = browser.find_element(By.NAME, "name")
    name.clear()
    name.send_keys("Llama 3 8B, second pass")
    screenshot("edited")
    page = browser.find_element(By.TAG_NAME, "html")
    browser.find_element(By.CSS_SELECTOR, "[data-testid=save-project]").click()
    WebDriverWait(browser, 15).until(page_replaced(page))
    heading = browser.find_element(By.CSS_SELECTOR, "[data-testid=project-name]")
    assert heading.text == "Llama 3 8B, second pass"
    saved = Project.objects.get(pk=project.pk)
    assert (saved.name, saved.deadline) == ("Llama 3 8B, second pass", DEADLINE)
