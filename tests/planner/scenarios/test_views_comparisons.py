"""The comparison pages: picking scenarios, the cheapest and fastest marks, saved comparisons."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from estimator.core.presets import recipe_scenario
from organisations.models import Organisation, Role
from organisations.services import membership_grant
from planner.scenarios.models import Comparison, Project, Scenario
from planner.scenarios.services import project_create, scenario_create
from pricing.models import PriceEntry
from tests.planner.conftest import (
    Capture,
    _add_scenario,
    _budget,
    _client,
    _finished_run,
    example_quote,
    list_price,
    small_spec,
    too_big_scenario,
)

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


# --- Across projects ------------------------------------------------------------------------


def _priced_scenario(
    user: User, project: Project, name: str, accelerator: str, gpus: int, tokens: float = 2e11
) -> Scenario:
    return scenario_create(
        user=user, project=project, name=name, spec=small_spec(accelerator, gpus, tokens),
        price_source="price_entry", price=list_price(accelerator), model_preset="llama3-8b",
    )  # fmt: skip


def _compare_url(*scenarios: Scenario) -> str:
    query = "&".join(f"scenario={s.pk}" for s in scenarios)
    return f"{reverse('planner:compare')}?{query}"


def test_compare_across_projects_names_each_scenarios_project(
    requester: User,
    project: Project,
    organisation: Organisation,
    other_organisation: Organisation,
    prices: None,
    django_capture_on_commit_callbacks: Capture,
) -> None:
    membership_grant(organisation=other_organisation, user=requester, role=Role.REQUESTER)
    elsewhere = project_create(user=requester, organisation=other_organisation, name="Globex 8B")
    here = _priced_scenario(requester, project, "Baseline", "H100-SXM", 64)
    there = _priced_scenario(requester, elsewhere, "Baseline", "H100-SXM", 64)
    for scenario in (here, there):
        _finished_run(django_capture_on_commit_callbacks, requester, scenario)

    client = _client(requester)
    response = client.get(_compare_url(here, there))
    assert response.status_code == 200
    body = response.content.decode()
    assert [s.pk for s in response.context["scenarios"]] == [here.pk, there.pk]
    assert body.count('data-testid="comparison-row"') == 2
    assert body.count('data-testid="project-name"') == 2
    assert project.name in body
    assert elsewhere.name in body
    charts = response.context["chart_data"]
    names = ["Llama 3 8B pre-training · Baseline", "Globex 8B · Baseline"]
    assert [point["name"] for point in charts["points"]] == names
    assert charts["step"]["labels"] == charts["memory"]["labels"] == names
    assert 'data-testid="save-comparison"' not in body  # saved comparisons are per project
    assert 'data-testid="like-for-like"' not in body  # same cluster, same tokens

    picker = client.get(reverse("planner:compare")).content.decode()
    groups = re.findall(r'data-testid="project-group" data-project-id="(\d+)"', picker)
    assert sorted(map(int, groups)) == sorted([project.pk, elsewhere.pk])
    assert 'data-testid="pick-more"' in picker


def test_compare_across_projects_refuses_another_organisations_scenario(
    requester: User, outsider: User, scenario: Scenario, other_organisation: Organisation
) -> None:
    theirs_project = project_create(user=outsider, organisation=other_organisation, name="Theirs")
    theirs = _priced_scenario(outsider, theirs_project, "Secret plan", "H100-SXM", 64)
    client = _client(requester)
    assert client.get(_compare_url(scenario, theirs)).status_code == 404
    assert client.get(_compare_url(theirs)).status_code == 404
    picker = client.get(reverse("planner:compare")).content.decode()
    assert "Secret plan" not in picker
    assert "Theirs" not in picker
    assert f'value="{theirs.pk}"' not in picker
    assert _client(outsider).get(_compare_url(scenario)).status_code == 404
    ignored = client.get(f"{_compare_url(scenario)}&scenario=nonsense&scenario={2**70}")
    assert [s.pk for s in ignored.context["scenarios"]] == [scenario.pk]


def test_compare_across_projects_needs_a_login(client: Client) -> None:
    response = client.get(reverse("planner:compare"))
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_the_project_compare_page_leads_to_the_cross_project_one(
    requester: User, scenario: Scenario
) -> None:
    url = reverse("planner:project-compare", args=[scenario.project.pk])
    body = _client(requester).get(f"{url}?scenario={scenario.pk}").content.decode()
    assert f'href="{_compare_url(scenario)}" data-testid="compare-across"' in body


# --- Like for like --------------------------------------------------------------------------


def _notes(user: User, project: Project, scenarios: list[Scenario]) -> list[str]:
    query = "&".join(f"scenario={s.pk}" for s in scenarios)
    url = f"{reverse('planner:project-compare', args=[project.pk])}?{query}"
    response = _client(user).get(url)
    notes: list[str] = response.context["like_for_like"]
    body = response.content.decode()
    assert body.count('data-testid="like-for-like-note"') == len(notes)
    if notes:  # said before the table that marks the cheapest and the fastest
        assert body.index('data-testid="like-for-like"') < body.index('data-testid="cheapest"')
    return notes


def test_the_comparison_says_when_cluster_sizes_differ(
    requester: User, project: Project, prices: None, django_capture_on_commit_callbacks: Capture
) -> None:
    scenarios = [
        _priced_scenario(requester, project, "A100 x256", "A100-80GB-SXM", 256),
        _priced_scenario(requester, project, "H100 x64", "H100-SXM", 64),
    ]
    for scenario in scenarios:
        _finished_run(django_capture_on_commit_callbacks, requester, scenario)
    notes = _notes(requester, project, scenarios)
    assert len(notes) == 1
    assert notes[0].startswith("Cluster sizes differ: 256 vs 64 GPUs")
    assert "fastest means fastest as configured, not per GPU" in notes[0]


def test_the_comparison_says_when_token_counts_differ(
    requester: User, project: Project, prices: None, django_capture_on_commit_callbacks: Capture
) -> None:
    scenarios = [
        _priced_scenario(requester, project, "Short", "H100-SXM", 64, tokens=1e11),
        _priced_scenario(requester, project, "Long", "H100-SXM", 64, tokens=1.5e12),
        _priced_scenario(requester, project, "Same", "H100-SXM", 64, tokens=1e11),
    ]
    for scenario in scenarios:
        _finished_run(django_capture_on_commit_callbacks, requester, scenario)
    notes = _notes(requester, project, scenarios)
    assert len(notes) == 1
    assert notes[0].startswith("Token counts differ: 1.5T vs 100B tokens")
    assert _notes(requester, project, [scenarios[0], scenarios[2]]) == []


def test_the_like_for_like_note_ignores_scenarios_not_yet_estimated(
    requester: User, project: Project, prices: None, django_capture_on_commit_callbacks: Capture
) -> None:
    ran = _priced_scenario(requester, project, "Ran", "H100-SXM", 64)
    _finished_run(django_capture_on_commit_callbacks, requester, ran)
    waiting = _priced_scenario(requester, project, "Waiting", "H100-SXM", 1024)
    assert _notes(requester, project, [ran, waiting]) == []


def test_the_comparison_shows_each_runs_warnings(
    requester: User, project: Project, prices: None, django_capture_on_commit_callbacks: Capture
) -> None:
    """A run that does not fit, or rests on a flagged price, says so beside its marks."""
    flagged = PriceEntry.objects.filter(accelerator__catalog_id="H100-SXM").exclude(data_flag="")
    scenarios = [
        too_big_scenario(project, requester),
        _add_scenario(requester, project, "H100 flagged", "H100-SXM", 64, flagged.first()),
        _add_scenario(requester, project, "H100 clean", "H100-SXM", 64, list_price("H100-SXM")),
    ]
    for scenario in scenarios:
        _finished_run(django_capture_on_commit_callbacks, requester, scenario)
    query = "&".join(f"scenario={s.pk}" for s in scenarios)
    url = f"{reverse('planner:project-compare', args=[project.pk])}?{query}"
    response = _client(requester).get(url)
    codes = {
        item["scenario"].pk: [warning.code for warning in item["warnings"]]
        for item in response.context["table"]
    }
    assert "does_not_fit" in codes[scenarios[0].pk]
    assert "price_flagged" in codes[scenarios[1].pk]
    assert "price_flagged" not in codes[scenarios[2].pk]
    assert "does_not_fit" not in codes[scenarios[2].pk]
    body = response.content.decode()
    listed = re.findall(
        r'data-testid="compare-warning" data-code="(\w+)" data-scenario-id="(\d+)"', body
    )
    assert ("does_not_fit", str(scenarios[0].pk)) in listed
    assert ("price_flagged", str(scenarios[1].pk)) in listed
