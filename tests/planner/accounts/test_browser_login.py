"""A person logs in through the real browser."""

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.wait import WebDriverWait

from lib.login_guard import login_lockout_lift
from planner.demo import demo_users_load
from tests.conftest import page_replaced

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_demo_requester_logs_in_and_out(live_server, browser, screenshot) -> None:
    demo_users_load()
    browser.get(f"{live_server.url}/accounts/login/")
    browser.find_element(By.ID, "id_username").send_keys("maya")
    browser.find_element(By.ID, "id_password").send_keys("maya-demo-pass")
    screenshot("filled")
    page = browser.find_element(By.TAG_NAME, "html")
    browser.find_element(By.CSS_SELECTOR, "form.form button[type=submit]").click()
    WebDriverWait(browser, 10).until(page_replaced(page))
    who = browser.find_element(By.CSS_SELECTOR, "[data-testid=current-user]")
    assert who.text == "Maya Lindqvist"
    screenshot("logged-in")
    # Wait for the page after logging out: the logged-in page has an ".account a" too, and
    # reading it while the browser navigates away fails as a stale element.
    page = browser.find_element(By.TAG_NAME, "html")
    browser.find_element(By.CSS_SELECTOR, "header form button").click()
    WebDriverWait(browser, 10).until(page_replaced(page))
    assert browser.find_element(By.CSS_SELECTOR, ".account a").text == "Log in"
    assert not browser.find_elements(By.CSS_SELECTOR, "[data-testid=current-user]")


def test_a_locked_user_name_is_told_when_to_try_again(live_server, browser, screenshot) -> None:
    demo_users_load()
    login_lockout_lift(username="finn", address="127.0.0.1")
    try:
        browser.get(f"{live_server.url}/accounts/login/")
        for _ in range(5):
            browser.find_element(By.ID, "id_username").clear()
            browser.find_element(By.ID, "id_username").send_keys("finn")
            browser.find_element(By.ID, "id_password").send_keys("not-his-password")
            page = browser.find_element(By.TAG_NAME, "html")
            browser.find_element(By.CSS_SELECTOR, "form.form button[type=submit]").click()
            WebDriverWait(browser, 10).until(page_replaced(page))  # the answer has loaded
        alert = browser.find_element(By.CSS_SELECTOR, "p.error[role=alert]")
        assert alert.text == "Too many failed logins for this user name: try again in 15 minutes."
        screenshot("locked")
    finally:
        login_lockout_lift(username="finn", address="127.0.0.1")


def test_a_user_creates_copies_and_revokes_an_api_token(live_server, browser, screenshot) -> None:
    demo_users_load()
    login_lockout_lift(username="maya", address="127.0.0.1")
    browser.get(f"{live_server.url}/accounts/login/")
    browser.find_element(By.ID, "id_username").send_keys("maya")
    browser.find_element(By.ID, "id_password").send_keys("maya-demo-pass")
    browser.find_element(By.CSS_SELECTOR, "form.form button[type=submit]").click()
    browser.find_element(By.CSS_SELECTOR, "[data-testid=nav-tokens]").click()
    assert browser.find_element(By.CSS_SELECTOR, "[data-testid=no-tokens]")
    browser.find_element(By.CSS_SELECTOR, "[data-testid=token-create]").click()
    token = browser.find_element(By.CSS_SELECTOR, "[data-testid=new-token-value]").text
    assert len(token) == 64
    screenshot("created")
    browser.get(f"{live_server.url}/accounts/tokens/")
    rows = browser.find_elements(By.CSS_SELECTOR, "[data-testid=token-row]")
    assert len(rows) == 1
    assert token[:8] in rows[0].text
    assert token not in browser.page_source
    rows[0].find_element(By.CSS_SELECTOR, "[data-testid=token-revoke]").click()
    assert "revoked" in browser.find_element(By.CSS_SELECTOR, ".messages").text
    assert browser.find_element(By.CSS_SELECTOR, "[data-testid=no-tokens]")
    screenshot("revoked")
