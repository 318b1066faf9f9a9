"""Saving the on-prem calculator's figures in the real browser: what one typed is what is saved."""

from __future__ import annotations

from decimal import Decimal

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from planner.demo import demo_users_load
from pricing.demo import pricing_demo_load
from pricing.models import OnPremProfile
from tests.pricing.test_browser import _log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_pricing_admin_saves_what_the_calculator_shows(live_server, browser, screenshot) -> None:
    demo_users_load()
    pricing_demo_load()
    _log_in(browser, live_server, "ivan", "ivan-demo-pass")
    browser.get(f"{live_server.url}/pricing/onprem/")
    price = browser.find_element(By.CSS_SELECTOR, "[data-testid=price-per-gpu-hour]")
    before = Decimal(price.text)
    field = browser.find_element(By.ID, "id_electricity_price_per_kwh")
    field.clear()
    field.send_keys("0.40")
    WebDriverWait(browser, 10).until(lambda _: Decimal(price.text) > before)

    browser.find_element(By.ID, "id_name").send_keys("H100 at 0.40 per kWh")
    screenshot("save-form")
    browser.find_element(By.CSS_SELECTOR, "[data-testid=onprem-save-button]").click()
    WebDriverWait(browser, 10).until(lambda _: "Saved the on-prem profile" in browser.page_source)
    saved = OnPremProfile.objects.get(name="H100 at 0.40 per kWh")
    assert saved.electricity_price_per_kwh == Decimal("0.40")
    shown = browser.find_element(By.CSS_SELECTOR, "[data-testid=price-per-gpu-hour]")
    assert Decimal(shown.text) > before  # the page now shows the saved profile
    screenshot("saved")
