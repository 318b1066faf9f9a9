"""The pricing pages in the real browser: the on-prem calculator recalculates as one types."""

from __future__ import annotations

from decimal import Decimal

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from planner.demo import demo_users_load
from pricing.demo import pricing_demo_load
from pricing.models import OnPremProfile
from pricing.selectors import onprem_profile_cost

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _log_in(browser, live_server, username: str, password: str) -> None:
    browser.get(f"{live_server.url}/accounts/login/")
    browser.find_element(By.ID, "id_username").send_keys(username)
    browser.find_element(By.ID, "id_password").send_keys(password)
    browser.find_element(By.CSS_SELECTOR, "form.form button[type=submit]").click()
    browser.find_element(By.CSS_SELECTOR, "[data-testid=current-user]")


def test_onprem_calculator_updates_as_one_types(live_server, browser, screenshot) -> None:
    demo_users_load()
    pricing_demo_load()
    profile = OnPremProfile.objects.get()
    _log_in(browser, live_server, "maya", "maya-demo-pass")
    browser.get(f"{live_server.url}/pricing/onprem/")
    price = browser.find_element(By.CSS_SELECTOR, "[data-testid=price-per-gpu-hour]")
    before = Decimal(price.text)
    assert round(before, 2) == round(onprem_profile_cost(profile=profile).price_per_gpu_hour, 2)
    screenshot("demo-profile")

    field = browser.find_element(By.ID, "id_electricity_price_per_kwh")
    field.clear()
    field.send_keys("0.40")
    WebDriverWait(browser, 10).until(lambda _: Decimal(price.text) > before)
    screenshot("dearer-power")

    field.clear()
    field.send_keys("-1")
    error = browser.find_element(By.CSS_SELECTOR, "[data-error-for=electricity_price_per_kwh]")
    WebDriverWait(browser, 10).until(lambda _: error.text.strip() != "")
    screenshot("bad-input")
    # Typing in the calculator never edits the stored profile.
    profile.refresh_from_db()
    assert round(onprem_profile_cost(profile=profile).price_per_gpu_hour, 2) == round(before, 2)


def test_catalog_compares_two_accelerators(live_server, browser, screenshot) -> None:
    demo_users_load()
    pricing_demo_load()
    _log_in(browser, live_server, "maya", "maya-demo-pass")
    browser.get(f"{live_server.url}/pricing/catalog/")
    for catalog_id in ("H100-SXM", "MI300X"):
        browser.find_element(By.CSS_SELECTOR, f"input[name=compare][value='{catalog_id}']").click()
    screenshot("catalog")
    browser.find_element(By.CSS_SELECTOR, "[data-testid=compare-submit]").click()
    table = browser.find_element(By.CSS_SELECTOR, "[data-testid=comparison]")
    assert "AMD Instinct MI300X" in table.text
    assert "NVIDIA H100 SXM5 80GB" in table.text
    screenshot("comparison")
