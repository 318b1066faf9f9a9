"""scripts/serve.py, what ``make run`` serves: the embedded default with a real Celery worker
and beat on a broker kept in files, on a fresh ``var/`` with the demo data.

The API answers a run or a capacity plan at once with the job queued, and the worker (not the
web process) finishes it; in Chromium, starting a run or re-running a plan lands on its page
while the job still runs, and the page shows its progress and then the result by itself; Ctrl-C
stops the web server, the worker and beat, leaving nothing. The pages' times are printed
(``-s``); ``benchmarks/bench_make_run.py`` measures them.
Needs no PostgreSQL or Redis: this is what a newcomer gets from ``make run``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from urllib.error import HTTPError, URLError
from urllib.parse import urlencode
from urllib.request import Request, urlopen

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from tests.planner.test_browser_layout import _log_in

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 90.0
JOB_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 20.0


@dataclass
class Served:
    process: subprocess.Popen[bytes]
    base: str
    var_dir: Path
    log: Path

    def log_tail(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")[-4000:]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _embedded_env(var_dir: Path) -> dict[str, str]:
    # serve.py sets TRAINPLAN_LOCAL_WORKER; migrate and the demo run without it, as in make run.
    unset = ("DATABASE_URL", "REDIS_URL", "TRAINPLAN_LOCAL_WORKER")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update(
        DJANGO_DEBUG="1",
        DJANGO_SETTINGS_MODULE="trainplan.settings",
        TRAINPLAN_VAR_DIR=str(var_dir),
        PYTHONUNBUFFERED="1",
    )
    return env


def _call(method: str, url: str, token: str | None = None, body: object = None) -> object:
    headers = {"Accept": "application/json"}
    data = None
    if token:
        headers["Authorization"] = f"Token {token}"
    if isinstance(body, dict) and method == "POST" and token is None:
        data = urlencode(body).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    elif body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    with urlopen(Request(url, data=data, method=method, headers=headers), timeout=10) as reply:  # noqa: S310
        return json.loads(reply.read())


def _ready(base: str) -> dict[str, object] | None:
    try:
        with urlopen(f"{base}/readyz", timeout=5) as reply:  # noqa: S310 (our server)
            return dict(json.loads(reply.read()))
    except (HTTPError, URLError, OSError):
        return None


def _processes_mentioning(needle: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if needle in text:
            found.append(f"{cmdline.parent.name}: {text}")
    return found


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    var_dir = tmp_path_factory.mktemp("var")
    env = _embedded_env(var_dir)
    python = sys.executable
    for step in (["migrate", "--noinput"], ["load_demo"]):
        subprocess.run(
            [python, "manage.py", *step], cwd=ROOT, env=env, check=True, capture_output=True
        )
    base = f"http://127.0.0.1:{_free_port()}"
    log = var_dir / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [python, "scripts/serve.py", base.removeprefix("http://")],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    served = Served(process, base, var_dir, log)
    deadline = time.monotonic() + START_TIMEOUT_S
    while (status := _ready(base)) is None or status.get("status") != "ok":
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            pytest.fail(f"serve.py did not get ready: {status}\n{served.log_tail()}")
        time.sleep(0.5)
    yield served
    if process.poll() is None:
        process.kill()
        process.wait()


def _token(served: Served) -> str:
    reply = _call(
        "POST",
        f"{served.base}/api/v1/auth/token/",
        body={"username": "maya", "password": "maya-demo-pass"},
    )
    assert isinstance(reply, dict)
    return str(reply["token"])


def _wait_status(served: Served, url: str, token: str, done: set[str]) -> dict[str, object]:
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while time.monotonic() < deadline:
        job = _call("GET", url, token)
        assert isinstance(job, dict)
        if job["status"] in done:
            return job
        time.sleep(0.3)
    pytest.fail(f"{url} not done in {JOB_TIMEOUT_S} s: {job}\n{served.log_tail()}")


def test_readiness_names_the_file_broker_and_the_embedded_worker(served: Served) -> None:
    status = _ready(served.base)
    assert status is not None
    services = status["services"]
    assert isinstance(services, dict)
    assert services["database"]["detail"] == "sqlite"
    assert services["broker"]["detail"] == "filesystem"
    assert services["worker"]["detail"].startswith("1 worker(s): embedded@")


def test_a_run_is_answered_queued_and_finished_by_the_worker(served: Served) -> None:
    token = _token(served)
    scenarios = _call("GET", f"{served.base}/api/v1/scenarios/", token)
    assert isinstance(scenarios, dict)
    scenario = scenarios["results"][0]["id"]
    accepted = _call("POST", f"{served.base}/api/v1/scenarios/{scenario}/runs/", token)
    assert isinstance(accepted, dict)
    # Eager Celery would answer with the run already finished; the worker has at most begun.
    assert accepted["status"] in {"queued", "running"}, accepted
    assert accepted["result"] is None
    run = _wait_status(
        served, f"{served.base}/api/v1/runs/{accepted['id']}/", token, {"succeeded", "failed"}
    )
    assert run["status"] == "succeeded", run
    assert run["result"] is not None
    assert "Task planner.estimation_run[" in served.log_tail()


def test_a_capacity_plan_is_searched_by_the_worker(served: Served) -> None:
    token = _token(served)
    accepted = _call(
        "POST",
        f"{served.base}/api/v1/capacity-plans/",
        token,
        body={
            "model_preset": "llama3-8b",
            "tokens": "200B",
            "deadline": (date.today() + timedelta(days=60)).isoformat(),
            "max_gpus": 512,
            "include_onprem": False,
        },
    )
    assert isinstance(accepted, dict)
    assert accepted["status"] in {"queued", "running"}, accepted
    plan = _wait_status(
        served,
        f"{served.base}/api/v1/capacity-plans/{accepted['id']}/",
        token,
        {"succeeded", "failed", "cancelled"},
    )
    assert plan["status"] == "succeeded", plan
    assert plan["options"], plan
    assert "Task planner.capacity_chunk[" in served.log_tail()


def _status_of(browser: WebDriver, testid: str) -> str:
    return str(
        browser.find_element(By.CSS_SELECTOR, f"[data-testid={testid}]").get_attribute(
            "data-status"
        )
    )


def _click_and_time(browser: WebDriver, testid: str) -> float:
    """Click the button and return the seconds until the next page has loaded."""
    old = browser.find_element(By.TAG_NAME, "html")
    start = time.perf_counter()
    browser.find_element(By.CSS_SELECTOR, f"[data-testid={testid}]").click()
    WebDriverWait(browser, 30, poll_frequency=0.02).until(
        lambda driver: (
            old.id != driver.find_element(By.TAG_NAME, "html").id
            and driver.execute_script("return document.readyState") == "complete"
        )
    )
    return time.perf_counter() - start


def test_in_chromium_a_run_page_shows_progress_then_the_result(
    served: Served, browser: WebDriver
) -> None:
    browser.delete_all_cookies()
    _log_in(browser, served.base, "maya")
    browser.get(f"{served.base}/scenarios/1/")
    seconds = _click_and_time(browser, "run-button")
    print(f"run saved and its page shown in {seconds * 1000:.0f} ms")
    # The page came back before the worker finished: it shows the live progress card.
    assert _status_of(browser, "run-status") in {"queued", "running"}
    assert browser.find_element(By.CSS_SELECTOR, "[data-testid=live-progress]").is_displayed()
    WebDriverWait(browser, JOB_TIMEOUT_S).until(
        lambda driver: _status_of(driver, "run-status") == "succeeded"
    )
    assert not browser.find_elements(By.CSS_SELECTOR, "[data-testid=live-progress]")


def test_in_chromium_a_capacity_plan_page_shows_progress_then_the_options(
    served: Served, browser: WebDriver
) -> None:
    token = _token(served)
    body = {
        "model_preset": "llama3-70b",
        "tokens": "2T",
        "deadline": (date.today() + timedelta(days=200)).isoformat(),
        "max_gpus": 4096,
    }
    plan = _call("POST", f"{served.base}/api/v1/capacity-plans/", token, body=body)
    assert isinstance(plan, dict)
    _wait_status(served, f"{served.base}/api/v1/capacity-plans/{plan['id']}/", token, {"succeeded"})
    browser.get(f"{served.base}/capacity/{plan['id']}/")
    seconds = _click_and_time(browser, "plan-rerun")
    print(f"plan saved and its page shown in {seconds * 1000:.0f} ms")
    assert browser.current_url != f"{served.base}/capacity/{plan['id']}/"
    assert _status_of(browser, "plan-status") in {"queued", "running"}
    assert browser.find_element(By.CSS_SELECTOR, "[data-testid=progress-bar]").is_displayed()
    WebDriverWait(browser, JOB_TIMEOUT_S).until(
        lambda driver: _status_of(driver, "plan-status") == "succeeded"
    )
    assert browser.find_element(By.CSS_SELECTOR, "[data-testid=verdict]").is_displayed()
    browser.delete_all_cookies()


def test_ctrl_c_stops_the_web_server_the_worker_and_beat(served: Served) -> None:
    schedule = str(served.var_dir / "celerybeat-schedule")
    port = served.base.rsplit(":", 1)[1]
    assert _processes_mentioning(schedule), "the worker is not running"
    served.process.send_signal(signal.SIGINT)
    served.process.wait(timeout=STOP_TIMEOUT_S)
    assert served.process.returncode == 0, served.log_tail()
    assert _processes_mentioning(schedule) == []
    assert _processes_mentioning(f"runserver 127.0.0.1:{port}") == []
    assert _ready(served.base) is None
    log = served.log_tail()
    assert "[serve] stopped the web server and the worker" in log
    # The worker stopped its own pool (warm shutdown); no pool process was killed under it.
    assert "Warm shutdown" in log
    assert "exited with 'signal" not in log
