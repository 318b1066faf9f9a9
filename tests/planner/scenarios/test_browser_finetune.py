"""Fine-tuning in real Chromium: a requester weighs LoRA against full fine-tuning.

Maya creates a project, starts a scenario from the recipe "Llama 3 8B - LoRA r16
(attention+MLP), 1B tokens, 8x H100" (the page's script fills the form in), prices it and runs
it. She starts a second scenario from the same recipe, switches it to full fine-tuning of the
same model on the same eight H100, and runs that. The comparison page then shows the LoRA
scenario training a small fraction of the parameters in less memory per GPU. Runs really
execute: eagerly in the embedded mode, on a real Celery worker when PostgreSQL and Redis are
set.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select, WebDriverWait

from estimator.core.presets import load_recipes
from organisations.demo import demo_organisation
from organisations.models import Role
from organisations.services import membership_grant
from planner.demo import demo_users_load
from planner.scenarios.models import EstimationRun, Project, RunStatus, Scenario
from pricing.demo import pricing_demo_load
from tests.planner.conftest import list_price
from tests.planner.test_browser_journey import CANVAS_INK, _inked, _log_in, _type, _wait_for_status

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RECIPE = "llama3-8b-lora-r16-8xh100"
LORA_NAME = "Llama 3 8B LoRA r16 on 8 H100"
FULL_NAME = "Llama 3 8B full fine-tune on 8 H100"
Screenshot = Callable[[str], Path]


def _value(browser: WebDriver, name: str) -> str:
    return browser.find_element(By.NAME, name).get_attribute("value") or ""


def _shown(browser: WebDriver, element_id: str) -> bool:
    return browser.find_element(By.ID, element_id).is_displayed()


def _create_project(browser: WebDriver) -> Project:
    browser.find_element(By.CSS_SELECTOR, "[data-testid=new-project]").click()
    _type(browser, "name", "Support assistant fine-tune")
    _type(browser, "goal", "Adapt Llama 3 8B to our support tickets: LoRA or a full fine-tune?")
    browser.find_element(By.CSS_SELECTOR, "[data-testid=create-project]").click()
    heading = browser.find_element(By.CSS_SELECTOR, "[data-testid=project-name]")
    return Project.objects.get(name=heading.text)


def _start_from_recipe(browser: WebDriver, screenshot: Screenshot, label: str) -> None:
    """Pick the LoRA recipe: the script fills the form in, the LoRA fields show."""
    browser.find_element(By.CSS_SELECTOR, "[data-testid=add-scenario]").click()
    assert not _shown(browser, "adapter-options")  # a new form trains every weight
    assert not browser.find_element(By.CSS_SELECTOR, "[data-testid=use-recipe]").is_displayed()
    Select(browser.find_element(By.NAME, "recipe")).select_by_value(RECIPE)
    filled = {
        name: _value(browser, name)
        for name in ("name", "model_preset", "training_method", "lora_rank", "lora_targets",
                     "tokens", "accelerator", "num_gpus", "framework")
    }  # fmt: skip
    assert filled == {
        "name": load_recipes()[RECIPE].name, "model_preset": "llama3-8b",
        "training_method": "lora", "lora_rank": "16", "lora_targets": "both", "tokens": "1B",
        "accelerator": "H100-SXM", "num_gpus": "8", "framework": "hf-peft",
    }  # fmt: skip
    assert _shown(browser, "adapter-options")
    assert not _shown(browser, "full-options")
    assert browser.find_element(By.ID, "recipe-note").is_displayed()
    screenshot(f"{label}-recipe")
    _scroll_to(browser, "[data-testid=training-options]")
    screenshot(f"{label}-method")


def _scroll_to(browser: WebDriver, selector: str) -> None:
    element = browser.find_element(By.CSS_SELECTOR, selector)
    browser.execute_script("arguments[0].scrollIntoView()", element)


def _save_and_run(browser: WebDriver, screenshot: Screenshot, name: str, label: str) -> None:
    _type(browser, "name", name)
    browser.find_element(By.CSS_SELECTOR, "[data-testid=save-scenario]").click()  # no price
    WebDriverWait(browser, 15).until(
        lambda driver: driver.find_elements(
            By.CSS_SELECTOR, ".errorlist, [data-testid=form-errors]"
        )
    )
    picker = Select(browser.find_element(By.CSS_SELECTOR, "[data-testid=recipe-select]"))
    assert picker.first_selected_option.get_attribute("value") == RECIPE  # not reset
    assert _value(browser, "name") == name
    price = list_price("H100-SXM", provider="nebius")
    Select(browser.find_element(By.NAME, "price")).select_by_value(f"price_entry:{price.pk}")
    screenshot(f"{label}-form")
    browser.find_element(By.CSS_SELECTOR, "[data-testid=save-scenario]").click()
    title = browser.find_element(By.CSS_SELECTOR, "[data-testid=scenario-name]").text
    assert title.startswith(name), title
    browser.find_element(By.CSS_SELECTOR, "[data-testid=run-button]").click()
    WebDriverWait(browser, 15).until(lambda driver: "/runs/" in driver.current_url)
    _wait_for_status(browser, RunStatus.SUCCEEDED)
    screenshot(f"{label}-run")


def _trainable(browser: WebDriver) -> dict[str, int]:
    """Trainable parameters per scenario name, as the comparison table shows them."""
    counts = {}
    for row in browser.find_elements(By.CSS_SELECTOR, "[data-testid=comparison-row]"):
        name = row.find_element(By.CSS_SELECTOR, "td.name a").text
        cell = row.find_element(By.CSS_SELECTOR, "[data-testid=trainable-parameters]")
        counts[name] = int(cell.get_attribute("data-value") or 0)
    return counts


def _memory(browser: WebDriver) -> dict[str, float]:
    """Memory per GPU per scenario name (GiB), as the comparison table shows it."""
    memory = {}
    for row in browser.find_elements(By.CSS_SELECTOR, "[data-testid=comparison-row]"):
        name = row.find_element(By.CSS_SELECTOR, "td.name a").text
        cell = row.find_element(By.CSS_SELECTOR, "[data-testid=memory-per-gpu]")
        memory[name] = float(cell.get_attribute("data-value") or 0)
    return memory


def test_a_requester_compares_lora_with_full_fine_tuning_in_the_browser(
    live_server: object,
    browser: WebDriver,
    screenshot: Screenshot,
    request: pytest.FixtureRequest,
) -> None:
    if not settings.CELERY_TASK_ALWAYS_EAGER:
        request.getfixturevalue("celery_worker")  # runs really go through Redis to a worker
    pricing_demo_load()
    demo_users_load()
    organisation = demo_organisation()  # the one the demo users and quote belong to
    maya = User.objects.get(username="maya")
    membership_grant(organisation=organisation, user=maya, role=Role.REQUESTER)
    base = live_server.url  # type: ignore[attr-defined]
    _log_in(browser, base)
    project = _create_project(browser)

    _start_from_recipe(browser, screenshot, "01-lora")
    _save_and_run(browser, screenshot, LORA_NAME, "02-lora")
    block = browser.find_element(By.CSS_SELECTOR, "[data-testid=training-method]")
    assert block.get_attribute("data-method") == "lora"
    assert "LoRA r=16 on attention and MLP" in block.text
    assert "(0.52 %)" in block.text  # 41.9 M of Llama 3 8B's 8.03 B parameters
    _scroll_to(browser, "[data-testid=training-method]")
    screenshot("02-lora-run-method")

    browser.get(f"{base}{project.get_absolute_url()}")
    _start_from_recipe(browser, screenshot, "03-full")
    Select(browser.find_element(By.NAME, "training_method")).select_by_value("full")
    assert not _shown(browser, "adapter-options")
    assert _shown(browser, "full-options")
    _save_and_run(browser, screenshot, FULL_NAME, "04-full")
    # Full training with AdamW and nothing offloaded looks as a pre-training run does.
    assert not browser.find_elements(By.CSS_SELECTOR, "[data-testid=training-method]")

    full = Scenario.objects.get(name=FULL_NAME)
    assert "method" not in full.spec["training"]
    assert Scenario.objects.get(name=LORA_NAME).spec["training"]["method"] == {"type": "lora"}
    browser.get(f"{base}{project.get_absolute_url()}")
    for box in browser.find_elements(By.CSS_SELECTOR, "[data-testid=compare-check]"):
        box.click()
    browser.find_element(By.CSS_SELECTOR, "[data-testid=compare-selected]").click()
    WebDriverWait(browser, 15).until(partial(_inked, chart="memory-chart"))
    assert browser.execute_script(CANVAS_INK, "memory-chart") > 1000

    trainable, memory = _trainable(browser), _memory(browser)
    assert trainable[LORA_NAME] < trainable[FULL_NAME] / 100  # 0.5 % of the weights
    assert memory[LORA_NAME] < memory[FULL_NAME]  # no gradients or optimizer states for 8 B
    runs = {run.scenario.name: run for run in EstimationRun.objects.select_related("scenario")}
    for name in (LORA_NAME, FULL_NAME):
        result = runs[name].result or {}
        assert trainable[name] == round(result["training_method"]["trainable_parameters"])
        assert memory[name] == pytest.approx(result["memory_per_gpu_gib"]["total"], rel=1e-5)
    table = browser.find_element(By.CSS_SELECTOR, "[data-testid=comparison-table]")
    assert "LoRA r=16 on attention and MLP" in table.text
    assert "Full training" in table.text
    browser.execute_script("window.scrollTo(0, 0)")
    screenshot("05-comparison")
