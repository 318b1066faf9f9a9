"""Entering a vendor quote in the real browser: a refused value shows on its field, and the
saved quote is listed as the commitment it is."""

from __future__ import annotations

from decimal import Decimal

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from planner.demo import demo_users_load
from pricing.demo import pricing_demo_load
from pricing.models import VendorQuote
from tests.pricing.test_browser import _log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TYPED = {
    "id_vendor": "Acme Compute",
    "id_reference": "Q-2026-17",
    "id_accelerator_count": "128",
    "id_total_price": "1121280",
    "id_term_months": "0",  # refused: a term is 1 to 600 months
    "id_currency": "USD",
}


def test_a_pricing_admin_enters_a_quote_and_sees_it_as_a_commitment(
    live_server, browser, screenshot
) -> None:
    demo_users_load()
    pricing_demo_load()
    _log_in(browser, live_server, "ivan", "ivan-demo-pass")
    browser.get(f"{live_server.url}/pricing/quotes/")
    browser.find_element(By.CSS_SELECTOR, "[data-testid=quote-new]").click()
    WebDriverWait(browser, 10).until(lambda b: b.find_elements(By.ID, "id_vendor"))
    for element_id, text in TYPED.items():
        browser.find_element(By.ID, element_id).send_keys(text)
    Select(browser.find_element(By.ID, "id_accelerator")).select_by_visible_text("H100-SXM")
    for element_id, day in (("id_valid_from", "2026-01-01"), ("id_valid_until", "2099-12-31")):
        field = browser.find_element(By.ID, element_id)
        browser.execute_script("arguments[0].value = arguments[1]", field, day)
    browser.find_element(By.CSS_SELECTOR, "[data-testid=quote-save]").click()

    term = WebDriverWait(browser, 10).until(
        lambda b: b.find_elements(By.CSS_SELECTOR, "[data-field=term_months].has-error")
    )[0]
    assert "between 1 and 600" in term.text
    assert not VendorQuote.objects.filter(vendor="Acme Compute").exists()
    screenshot("refused-term")

    field = browser.find_element(By.ID, "id_term_months")
    field.clear()
    field.send_keys("6")
    browser.find_element(By.CSS_SELECTOR, "[data-testid=quote-save]").click()
    WebDriverWait(browser, 10).until(lambda b: "Saved the quote from Acme Compute" in b.page_source)
    quote = VendorQuote.objects.get(vendor="Acme Compute")
    # 1,121,280 / (128 x 6 months x 730 h) = 2.00 per GPU-hour
    assert quote.price_per_accelerator_hour == Decimal("2.0000000000")
    row = browser.find_element(By.CSS_SELECTOR, f"[data-testid=quote-row][data-quote='{quote.pk}']")
    assert "1,121,280 USD commitment for 6 months" in row.text
    assert "2.00 USD/GPU-h" in row.text
    screenshot("saved")
