"""The comparison pages: picking scenarios, the cheapest and fastest marks, saved comparisons."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from estimator.core.presets import recipe_scenario
from planner.models import Comparison, Organisation, Project, Scenario
from planner.services import project_create, scenario_create
from tests.planner.conftest import example_quote, list_price
from tests.planner.views.conftest import Capture, _add_scenario, _budget, _client, _finished_run

pytestmark = pytest.mark.django_db


def _marked(body: str, mark: str) -> list[int]:
    return [int(pk) for pk in re.findall(rf'data-testid="{mark}" data-scenario-id="(\d+)"', body)]


def test_the_comparison_marks_the_cheapest_and_the_fastest(
    requester: User, project: Project, prices: None, django_capture_on_commit_callbacks: Capture
) -> None:
    scenarios = [
        _add_scenario(requester, project, "A100 x32 at AWS", "A100-80GB-SXM", 32,
                      list_price("A100-80GB-SXM", provider="aws")),
        _add_scenario(requester, project, "H100 x256 quote", "H100-SXM", 256, example_quote()),
        _add_scenario(requester, project, "H100 x64 at Nebius", "H100-SXM", 64,
                      list_price("H100-SXM", provider="nebius")),
    ]  # fmt: skip
    runs = [_finished_run(django_capture_on_commit_callbacks, requester, s) for s in scenarios]
    cheapest = min(runs, key=lambda run: Decimal(_budget(run)["cost"]["p50"])).scenario_id
    fastest = min(runs, key=lambda run: _budget(run)["training_days"]["p50"]).scenario_id

    query = "&".join(f"scenario={s.pk}" for s in scenarios)
    client = _client(requester)
    response = client.get(f"{reverse('planner:project-compare', args=[project.pk])}?{query}")
    body = response.content.decode()
    assert (_marked(body, "cheapest"), _marked(body, "fastest")) == ([cheapest], [fastest])
    charts = response.context["chart_data"]
    assert [point["name"] for point in charts["points"]] == [s.name for s in scenarios]
    assert [p["cheapest"] for p in charts["points"]] == [s.pk == cheapest for s in scenarios]
    for testid in ("cost-vs-days-chart", "step-time-chart", "memory-chart"):
        assert f'data-testid="{testid}"' in body
    assert 'id="comparison-data"' in body

    response = client.post(
        reverse("planner:project-compare", args=[project.pk]),
        {"name": "Three ways", "scenario": [s.pk for s in scenarios]},
    )
    saved = Comparison.objects.get()
    assert response["Location"] == saved.get_absolute_url()
    assert set(saved.scenarios.all()) == set(scenarios)
    body = client.get(saved.get_absolute_url()).content.decode()
    assert (_marked(body, "cheapest"), _marked(body, "fastest")) == ([cheapest], [fastest])
    assert 'data-testid="training-method"' not in body  # pre-training: no training column


def test_a_comparison_needs_two_scenarios_and_a_name(requester: User, scenario: Scenario) -> None:
    client = _client(requester)
    url = reverse("planner:project-compare", args=[scenario.project.pk])
    body = client.get(f"{url}?scenario={scenario.pk}&scenario=nonsense").content.decode()
    assert 'data-testid="pick-more"' in body
    response = client.post(url, {"name": "Alone", "scenario": [scenario.pk]})
    assert "at least two" in " ".join(response.context["form"].non_field_errors())
    response = client.post(url, {"name": "", "scenario": [scenario.pk]})
    assert "name" in response.context["form"].errors
    assert not Comparison.objects.exists()


def test_a_comparison_ignores_scenarios_of_other_projects(
    requester: User, scenario: Scenario, organisation: Organisation
) -> None:
    other_project = project_create(user=requester, organisation=organisation, name="Other")
    other = _add_scenario(
        requester, other_project, "Elsewhere", "H100-SXM", 64, list_price("H100-SXM")
    )
    url = reverse("planner:project-compare", args=[scenario.project.pk])
    response = _client(requester).get(f"{url}?scenario={scenario.pk}&scenario={other.pk}")
    assert [s.pk for s in response.context["scenarios"]] == [scenario.pk]


def _trainable(body: str) -> dict[int, int]:
    cells = re.findall(
        r'data-testid="comparison-row" data-scenario-id="(\d+)".*?'
        r'data-testid="trainable-parameters" data-value="(\d+)"',
        body,
        flags=re.DOTALL,
    )
    return {int(pk): int(count) for pk, count in cells}


def test_lora_and_full_fine_tuning_side_by_side(
    requester: User, project: Project, prices: None, django_capture_on_commit_callbacks: Capture
) -> None:
    scenarios = [
        scenario_create(
            user=requester, project=project, name=name, spec=recipe_scenario(recipe),
            price_source="price_entry", price=list_price("H100-SXM"), model_preset="llama3-8b",
        )
        for name, recipe in (("LoRA", "llama3-8b-lora-r16-8xh100"),
                             ("Full", "llama3-8b-full-8xh100"))
    ]  # fmt: skip
    runs = [_finished_run(django_capture_on_commit_callbacks, requester, s) for s in scenarios]
    query = "&".join(f"scenario={s.pk}" for s in scenarios)
    url = f"{reverse('planner:project-compare', args=[project.pk])}?{query}"
    body = _client(requester).get(url).content.decode()
    assert "Training<span" in body
    lora, full = (run.result or {} for run in runs)
    assert _trainable(body) == {
        scenarios[0].pk: round(lora["training_method"]["trainable_parameters"]),
        scenarios[1].pk: round(full["training_method"]["trainable_parameters"]),
    }
    assert "LoRA r=16 on attention and MLP" in body
    assert "Full training" in body
