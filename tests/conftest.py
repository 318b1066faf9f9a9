"""Fixtures shared by the whole suite: real services, a real Celery worker, a real browser."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.conf import settings as django_settings
from pytest_django import DjangoDbBlocker
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chromium.webdriver import ChromiumDriver
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement

from tests.services import service_missing
from trainplan.celery import app as celery_app

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
WORKER_START_TIMEOUT_S = 60


# A fast hasher: the suite creates users by the hundred, and the production hasher (PBKDF2 with
# its full iteration count) is built to be slow. Logins in the browser tests still check it.
TEST_PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def pytest_configure(config: pytest.Config) -> None:
    """Tests speak plain HTTP (no TLS redirect, HSTS or secure cookies) and hash passwords fast.

    Set before the live server builds its middleware, which reads these once at start-up.
    """
    django_settings.PASSWORD_HASHERS = TEST_PASSWORD_HASHERS
    django_settings.SECURE_SSL_REDIRECT = False
    django_settings.SECURE_HSTS_SECONDS = 0
    django_settings.SESSION_COOKIE_SECURE = False
    django_settings.CSRF_COOKIE_SECURE = False


def _reachable(url: str) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 0), 1.0):
            return True
    except OSError:
        return False


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("postgres") and django_settings.EMBEDDED:
        service_missing(
            "PostgreSQL not configured: set DATABASE_URL=postgres://... (make test does)"
        )
    if item.get_closest_marker("redis"):
        url = django_settings.REDIS_URL
        if not url:
            service_missing("Redis not configured: set REDIS_URL=redis://... (make test does)")
        elif not _reachable(url):
            service_missing(f"Redis does not answer at {url}")


def _test_database_url() -> str:
    """DATABASE_URL pointing at the test database pytest-django created."""
    from django.db import connection

    parts = urlsplit(django_settings.DATABASE_URL)
    return urlunsplit(parts._replace(path="/" + str(connection.settings_dict["NAME"])))


@pytest.fixture(scope="session")
def celery_worker_factory(
    django_db_setup: None,
    django_db_blocker: DjangoDbBlocker,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[type]:
    """Start real ``celery -A trainplan worker`` processes on the test database and broker."""
    if django_settings.EMBEDDED or not django_settings.REDIS_URL:
        service_missing("a real Celery worker needs DATABASE_URL (PostgreSQL) and REDIS_URL")
    with django_db_blocker.unblock():
        database_url = _test_database_url()
    log_dir = tmp_path_factory.mktemp("celery")
    workers: list[subprocess.Popen[bytes]] = []

    class WorkerProcess:
        def __init__(self, extra_env: dict[str, str] | None = None) -> None:
            self.name = f"test-{uuid.uuid4().hex[:8]}@{socket.gethostname()}"
            env = {
                **os.environ,
                "DATABASE_URL": database_url,
                "REDIS_URL": django_settings.REDIS_URL,
                **(extra_env or {}),
            }
            self.log = log_dir / f"{self.name.split('@')[0]}.log"
            command = [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "trainplan",
                "worker",
                "--pool=solo",
                "--loglevel=INFO",
                "-n",
                self.name,
                "--without-gossip",
                "--without-mingle",
            ]
            with self.log.open("wb") as log:
                self.process = subprocess.Popen(
                    command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
                )
            workers.append(self.process)
            self._wait_until_ready()

        def _wait_until_ready(self) -> None:
            deadline = time.monotonic() + WORKER_START_TIMEOUT_S
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    break
                if celery_app.control.ping(destination=[self.name], timeout=0.5):
                    return
            self.stop()
            pytest.fail(f"Celery worker did not start; log:\n{self.log.read_text()[-3000:]}")

        def stop(self, kill: bool = False) -> None:
            if self.process.poll() is None:
                self.process.kill() if kill else self.process.terminate()
                self.process.wait(timeout=30)

    celery_app.control.purge()
    yield WorkerProcess
    for process in workers:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=30)


def page_replaced(page: WebElement) -> Callable[[WebDriver], bool]:
    """A wait condition: the document holding ``page`` (its ``<html>``) has been replaced.

    Selenium's ``staleness_of`` only knows StaleElementReferenceException; while Chromium
    swaps documents it may instead answer "Node with given id does not belong to the
    document", which means the same thing.
    """

    def replaced(_driver: WebDriver) -> bool:
        try:
            page.is_enabled()
        except StaleElementReferenceException:
            return True
        except WebDriverException as error:
            if "does not belong to the document" in str(error):
                return True
            raise
        return False

    return replaced


@pytest.fixture
def eager_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Celery tasks run in this process, as in the embedded default, whatever the broker.

    For tests of what a task does (the demo's figures, a notification's text); the tests
    that need a real worker start one with ``celery_worker``.
    """
    monkeypatch.setitem(celery_app.conf, "task_always_eager", True)


@pytest.fixture
def celery_worker(celery_worker_factory: type) -> Iterator[object]:
    worker = celery_worker_factory()
    yield worker
    worker.stop()


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


@pytest.fixture(scope="session")
def browser() -> Iterator[WebDriver]:
    """Debian's headless Chromium driven by Selenium; screenshots go to test-artifacts/."""
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        service_missing("Chromium not installed: apt-get install chromium chromium-driver")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
    ):
        options.add_argument(flag)
    # The console log, where Chromium reports what the Content-Security-Policy refused.
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.implicitly_wait(5)
    ARTIFACTS.mkdir(exist_ok=True)
    yield driver
    driver.quit()


def csp_violations(driver: WebDriver) -> list[str]:
    """The Content-Security-Policy violations in Chromium's console since it was last read."""
    assert isinstance(driver, ChromiumDriver)  # the console log is Chromium's, not WebDriver's
    return [
        entry["message"]
        for entry in driver.get_log("browser")
        if "Content Security Policy" in entry["message"] or "Refused to" in entry["message"]
    ]


@pytest.fixture(autouse=True)
def _fail_on_csp_violation(request: pytest.FixtureRequest) -> Iterator[None]:
    """A browser test fails when a page it visited broke the Content-Security-Policy.

    The policy blocks an inline script or style="" silently, leaving a page that looks fine
    but does not work; only the console says why. Tests that provoke a violation on purpose
    read it with ``csp_violations`` themselves, which empties the log.
    """
    if "browser" not in request.fixturenames:
        yield
        return
    driver: WebDriver = request.getfixturevalue("browser")
    csp_violations(driver)  # start from an empty log
    yield
    if violations := csp_violations(driver):
        pytest.fail("Content-Security-Policy violations:\n" + "\n".join(violations))


@pytest.fixture
def screenshot(browser: WebDriver, request: pytest.FixtureRequest) -> Callable[[str], Path]:
    def take(label: str) -> Path:
        path = ARTIFACTS / f"{request.node.name}-{label}.png"
        browser.save_screenshot(str(path))
        return path

    return take
