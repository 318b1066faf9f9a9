"""Every main page at a phone's width (390 px) and a laptop's (1,366 px), on the demo data.

No page scrolls sideways: a wide table scrolls inside its own box (``.scroll``), and the page
itself is never wider than the window. The capacity page's progress bar is as full as the
share of chunks searched, and its log-scale axes carry a label at each tick, unit included.
The on-prem calculator shows no error before anything is typed and keeps its result in place
while figures change.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import timedelta
from functools import partial

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone
from pytest_django.live_server_helper import LiveServer
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from planner.budgets.models import BudgetRequest
from planner.capacity.models import CapacityPlan, PlanStatus
from planner.capacity.services import CapacityQuestion, capacity_plan_create
from planner.demo import demo_users_load
from planner.demo_project import DEMO_PROJECT, planner_demo_load
from planner.scenarios.models import Project
from pricing.demo import EXAMPLE_BOOK_NAME, pricing_demo_load
from pricing.models import PriceBook
from tests.planner.budgets.test_browser_layout import OVERFLOWING_JS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTHS = (390, 1366)
HEIGHT = 900

PAGE_WIDTHS_JS = (
    "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
)

#: The figures (the text of number cells) that break over more than one line.
WRAPPED_FIGURES_JS = """
const wrapped = [];
for (const cell of document.querySelectorAll('table.kv.figures td, td.num, .figure .value')) {
  for (const node of cell.childNodes) {
    if (node.nodeType !== Node.TEXT_NODE || !node.textContent.trim()) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    const lines = new Set([...range.getClientRects()].map((rect) => Math.round(rect.top)));
    if (lines.size > 1) wrapped.push(node.textContent.trim());
  }
}
return wrapped.slice(0, 10);
"""


@pytest.fixture
def demo(eager_tasks: None) -> dict[str, str]:
    """The demo (users, prices, project, runs, a submitted budget request) and a finished
    capacity plan: the path of each page the test visits."""
    demo_users_load()
    pricing_demo_load()
    planner_demo_load()
    project = Project.objects.get(name=DEMO_PROJECT)
    budget = BudgetRequest.objects.get(project=project)
    plan = _plan()
    plan.refresh_from_db()
    assert plan.status == PlanStatus.SUCCEEDED, plan.error
    return {
        "dashboard": "/",
        "project": project.get_absolute_url(),
        "run": budget.run.get_absolute_url(),
        "compare": f"/projects/{project.pk}/compare/",
        "budget": budget.get_absolute_url(),
        "capacity": "/capacity/",
        "capacity plan": plan.get_absolute_url(),
        "on-prem": "/pricing/onprem/",
        "scenario": budget.run.scenario.get_absolute_url(),
        "budgets": "/budgets/?tab=all",
        "catalog": "/pricing/catalog/",
        "accelerator": "/pricing/catalog/H100-SXM/",
        "price books": "/pricing/books/",
        "quotes": "/pricing/quotes/",
    }


def _plan() -> CapacityPlan:
    question = CapacityQuestion(
        deadline=timezone.localdate() + timedelta(days=90),
        currency="USD",
        max_gpus=256,
        model_preset="llama3-8b",
        tokens=1e12,
        book=PriceBook.objects.get(name=EXAMPLE_BOOK_NAME),
        include_onprem=False,
    )
    return capacity_plan_create(user=User.objects.get(username="maya"), question=question)


@pytest.fixture
def sized(browser: WebDriver) -> Iterator[WebDriver]:
    """The session's browser; its size comes back afterwards."""
    before = browser.get_window_size()
    yield browser
    browser.set_window_size(before["width"], before["height"])


def _log_in(browser: WebDriver, base: str, username: str) -> None:
    browser.get(f"{base}/accounts/login/")
    browser.find_element(By.ID, "id_username").send_keys(username)
    browser.find_element(By.ID, "id_password").send_keys(f"{username}-demo-pass")
    browser.find_element(By.CSS_SELECTOR, "form.form button[type=submit]").click()
    browser.find_element(By.CSS_SELECTOR, "[data-testid=current-user]")


@pytest.mark.parametrize("username", ["finn", "maya"])
def test_no_page_scrolls_sideways_or_breaks_a_figure_on_a_phone_or_a_laptop(
    live_server: LiveServer, sized: WebDriver, demo: dict[str, str], username: str
) -> None:
    _log_in(sized, live_server.url, username)
    wide: dict[str, object] = {}
    wrapped: dict[str, list[str]] = {}
    for width in WIDTHS:
        sized.set_window_size(width, HEIGHT)
        for name, path in demo.items():
            sized.get(live_server.url + path)
            page, viewport = sized.execute_script(PAGE_WIDTHS_JS)
            assert viewport <= width
            if page > viewport:
                wide[f"{name} at {width} px"] = (page, sized.execute_script(OVERFLOWING_JS))
            if figures := sized.execute_script(WRAPPED_FIGURES_JS):
                wrapped[f"{name} at {width} px"] = figures
    assert wide == {}
    assert wrapped == {}, "figures broken over lines"


def test_the_budget_tables_show_whole_on_a_laptop(
    live_server: LiveServer, sized: WebDriver, demo: dict[str, str]
) -> None:
    _log_in(sized, live_server.url, "finn")
    sized.set_window_size(1366, HEIGHT)
    sized.get(live_server.url + demo["budget"])
    for table in ("budget-comparison", "budget-whole-run"):
        box, content = sized.execute_script(
            "const t = document.querySelector(`[data-testid=${arguments[0]}]`);"
            "const box = t.closest('.scroll'); return [box.clientWidth, box.scrollWidth];",
            table,
        )
        assert content <= box, f"{table} is clipped: {content} px in a {box}-px box"


def _log_ticks(low: float, high: float) -> list[float]:
    """charts.js's ``logTicks``: 1, 2 and 5 x 10^k (finer when fewer than four) from the one
    at or below ``low`` to the one at or above ``high``."""
    ticks: list[float] = []
    for steps in ((1, 2, 5), (1, 1.5, 2, 3, 5, 7), (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9)):
        candidates = [
            step * 10.0**power
            for power in range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1)
            for step in steps
        ]
        start = max(value for value in candidates if value <= low * (1 + 1e-9))
        end = min(value for value in candidates if value >= high * (1 - 1e-9))
        ticks = [value for value in candidates if start <= value <= end]
        if len(ticks) >= 4:
            break
    return ticks


AXIS_JS = """
const chart = window.Chart && Chart.getChart(document.getElementById('capacity-chart'));
if (!chart) return null;
const axis = (scale) => ({
  values: scale.ticks.map((tick) => tick.value), labels: scale.ticks.map((tick) => tick.label),
  title: scale.options.title.text, min: scale.min, max: scale.max});
return {x: axis(chart.scales.x), y: axis(chart.scales.y)};
"""


def test_the_capacity_chart_labels_every_tick_of_its_log_axes_with_units(
    live_server: LiveServer, sized: WebDriver, demo: dict[str, str]
) -> None:
    plan = CapacityPlan.objects.get()
    _log_in(sized, live_server.url, "maya")
    sized.set_window_size(1366, HEIGHT)
    sized.get(live_server.url + demo["capacity plan"])
    axes = WebDriverWait(sized, 10).until(lambda driver: driver.execute_script(AXIS_JS))
    data = sized.execute_script(
        "return JSON.parse(document.getElementById('capacity-data').textContent)"
    )
    days = [point["x"] for point in data["points"]] + [plan.deadline_days]
    costs = [point["y"] for point in data["points"]]
    for axis, values, unit in (("x", days, " d"), ("y", costs, " USD")):
        expected = _log_ticks(min(values), max(values))
        assert len(expected) >= 4
        assert axes[axis]["values"] == pytest.approx(expected, rel=1e-9), axis
        assert axes[axis]["min"] <= min(values)
        assert axes[axis]["max"] >= max(values)
        assert all(label.endswith(unit) for label in axes[axis]["labels"]), axes[axis]
        assert "log scale" in axes[axis]["title"]
    assert "USD" in axes["y"]["title"]


BAR_JS = """
const track = document.querySelector('[data-testid=progress-bar]');
return [track.getBoundingClientRect().width,
        track.querySelector('.bar').getBoundingClientRect().width,
        document.querySelector('[data-testid=plan-state]').textContent];
"""


def test_the_capacity_progress_bar_is_as_full_as_the_share_of_chunks_searched(
    live_server: LiveServer,
    sized: WebDriver,
    eager_tasks: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    demo_users_load()
    pricing_demo_load()
    # The plan stays queued: its chunks' tasks are never sent, as while the workers are busy.
    monkeypatch.setattr(transaction, "on_commit", lambda *args, **kwargs: None)
    plan = _plan()
    assert plan.status == PlanStatus.QUEUED
    total = plan.chunks_total
    assert total > 3
    _log_in(sized, live_server.url, "maya")
    sized.set_window_size(1366, HEIGHT)
    sized.get(live_server.url + plan.get_absolute_url())
    track, bar, message = sized.execute_script(BAR_JS)
    assert bar == 0, f"an empty plan's bar is {bar} of {track} px"
    assert f"0 of {total} chunks" in message
    done = total // 3
    CapacityPlan.objects.filter(pk=plan.pk).update(status=PlanStatus.RUNNING, progress=done / total)
    # The page polls the plan's status once a second and moves the bar (0.6-s transition).
    WebDriverWait(sized, 10).until(
        lambda driver: f"{done} of {total}" in driver.execute_script(BAR_JS)[2]
    )
    WebDriverWait(sized, 5).until(
        lambda driver: (
            abs(driver.execute_script(BAR_JS)[1] / track - (done * 100 // total) / 100) < 0.005
        )
    )


def _says(element: WebElement, text: str, _driver: WebDriver) -> bool:
    return text in element.text


RESULT_TOP_JS = """
const box = document.querySelector('.onprem-result').getBoundingClientRect();
return Math.round(box.top + window.scrollY);
"""


@pytest.mark.parametrize("width", WIDTHS)
def test_the_onprem_calculator_starts_clean_and_keeps_its_result_in_place(
    live_server: LiveServer, sized: WebDriver, width: int
) -> None:
    demo_users_load()
    pricing_demo_load()
    _log_in(sized, live_server.url, "ivan")
    sized.set_window_size(width, HEIGHT)
    sized.get(live_server.url + "/pricing/onprem/")
    errors = sized.find_elements(By.CSS_SELECTOR, "[data-error-for]")
    assert len(errors) == 13
    assert [error.text for error in errors if error.text] == []
    before = sized.execute_script(RESULT_TOP_JS)
    status = sized.find_element(By.CSS_SELECTOR, "[data-testid=calc-status]")
    for value, said in (("1.3", "Recalculated"), ("0.5", "must be at least 1")):
        field = sized.find_element(By.ID, "id_pue")
        field.clear()
        field.send_keys(value)
        WebDriverWait(sized, 10).until(partial(_says, status, said))
        assert sized.execute_script(RESULT_TOP_JS) == before, value
