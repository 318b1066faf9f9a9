"""A person logs in through the real browser."""

import pytest
from selenium.webdriver.common.by import By

from planner.demo import demo_users_load

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_demo_requester_logs_in_and_out(live_server, browser, screenshot) -> None:
    demo_users_load()
    browser.get(f"{live_server.url}/accounts/login/")
    browser.find_element(By.ID, "id_username").send_keys("maya")
    browser.find_element(By.ID, "id_password").send_keys("maya-demo-pass")
    screenshot("filled")
    browser.find_element(By.CSS_SELECTOR, "form.form button[type=submit]").click()
    who = browser.find_element(By.CSS_SELECTOR, "[data-testid=current-user]")
    assert who.text == "Maya Lindqvist"
    screenshot("logged-in")
    browser.find_element(By.CSS_SELECTOR, "header form button").click()
    assert browser.find_element(By.CSS_SELECTOR, ".account a").text == "Log in"
    assert not browser.find_elements(By.CSS_SELECTOR, "[data-testid=current-user]")
