"""The planner's pages through Django's test client: access, forms, runs, comparisons.

Runs are started with ``run_start`` and executed with ``run_execute`` (the worker's service)
inside ``django_capture_on_commit_callbacks(execute=False)``, so the same tests hold in the
embedded mode (eager Celery) and on PostgreSQL + Redis, where a task would go to the broker.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import date
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from estimator.core.presets import load_presets
from planner.demo import DEMO_USERS, demo_users_load
from planner.models import (
    AuditEvent,
    BudgetRequest,
    Comparison,
    EstimationRun,
    Organisation,
    Project,
    RunStatus,
    Scenario,
)
from planner.roles import APPROVER, REQUESTER, user_has_role
from planner.services import (
    budget_request_create,
    comparison_create,
    membership_grant,
    project_create,
    run_execute,
    run_start,
    scenario_create,
    scenario_update,
)
from tests.planner.conftest import example_quote, list_price, small_spec

pytestmark = pytest.mark.django_db

Capture = Callable[..., Any]


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _finished_run(capture: Capture, user: User, scenario: Scenario, seed: int = 7) -> EstimationRun:
    """A run started and executed by the worker's own service (no broker needed)."""
    with capture(execute=False):
        run = run_start(user=user, scenario=scenario, seed=seed, samples=400)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error
    return run


def _budget(run: EstimationRun) -> dict[str, Any]:
    assert run.budget is not None, run.error
    return run.budget


def _add_scenario(
    user: User, project: Project, name: str, accelerator: str, gpus: int, price: Any
) -> Scenario:
    return scenario_create(
        user=user,
        project=project,
        name=name,
        spec=small_spec(accelerator, gpus),
        price_source="vendor_quote" if price.__class__.__name__ == "VendorQuote" else "price_entry",
        price=price,
        model_preset="llama3-8b",
    )


# --- The home page and demo logins (kept from before the planner pages) ---------------------


def test_home_page_offers_login_to_anonymous_visitors(client: Client) -> None:
    response = client.get("/")
    assert response.status_code == 200
    assert b"Log in" in response.content


def test_demo_users_log_in_with_the_printed_passwords(client: Client) -> None:
    demo_users_load()
    for demo in DEMO_USERS:
        response = client.post(
            "/accounts/login/", {"username": demo.username, "password": demo.password}
        )
        assert response.status_code == 302, demo.username
        assert client.get("/").context["user"].username == demo.username
        client.post("/accounts/logout/")


def test_demo_load_is_idempotent_and_assigns_roles() -> None:
    demo_users_load()
    demo_users_load()
    assert User.objects.filter(username__in=[d.username for d in DEMO_USERS]).count() == len(
        DEMO_USERS
    )
    requester = User.objects.get(username="maya")
    assert user_has_role(requester, REQUESTER)
    assert not user_has_role(requester, APPROVER)


def test_wrong_password_shows_an_error(client: Client) -> None:
    demo_users_load()
    response = client.post("/accounts/login/", {"username": "maya", "password": "wrong"})
    assert response.status_code == 200
    assert b"didn't match" in response.content


# --- Every page renders for a member; other organisations see nothing ---------------------


@pytest.fixture
def estimated(
    scenario: Scenario, requester: User, django_capture_on_commit_callbacks: Capture
) -> EstimationRun:
    return _finished_run(django_capture_on_commit_callbacks, requester, scenario)


@pytest.fixture
def comparison(estimated: EstimationRun, scenario: Scenario, requester: User) -> Comparison:
    other = _add_scenario(
        requester, scenario.project, "A100 list price", "A100-80GB-SXM", 64,
        list_price("A100-80GB-SXM", provider="aws"),
    )  # fmt: skip
    return comparison_create(
        user=requester, project=scenario.project, name="H100 or A100", scenarios=[scenario, other]
    )


def _pages(run: EstimationRun, comparison: Comparison) -> dict[str, str]:
    scenario, project = run.scenario, run.scenario.project
    return {
        "dashboard": reverse("home"),
        "project list": reverse("planner:project-list"),
        "project": reverse("planner:project-detail", args=[project.pk]),
        "scenario": reverse("planner:scenario-detail", args=[scenario.pk]),
        "scenario export": reverse("planner:scenario-export", args=[scenario.pk]),
        "run": reverse("planner:run-detail", args=[run.pk]),
        "run status": reverse("planner:run-status", args=[run.pk]),
        "compare": reverse("planner:project-compare", args=[project.pk])
        + "".join(
            f"{'&' if i else '?'}scenario={s.pk}" for i, s in enumerate(comparison.scenarios.all())
        ),
        "comparison": reverse("planner:comparison-detail", args=[comparison.pk]),
        "capacity": reverse("planner:capacity"),
    }


AUTHOR_PAGES = (
    "project-create",
    "project-edit",
    "project-delete",
    "scenario-create",
    "scenario-import",
    "scenario-edit",
    "scenario-json",
    "scenario-delete",
)
PROJECT_AUTHOR_PAGES = ("project-edit", "project-delete", "scenario-create", "scenario-import")


def _author_page(name: str, run: EstimationRun) -> str:
    target = run.scenario.project.pk if name in PROJECT_AUTHOR_PAGES else run.scenario.pk
    return (
        reverse(f"planner:{name}")
        if name == "project-create"
        else reverse(f"planner:{name}", args=[target])
    )


def test_every_page_renders_for_a_requester(
    requester: User, estimated: EstimationRun, comparison: Comparison
) -> None:
    client = _client(requester)
    for name, url in _pages(estimated, comparison).items():
        assert client.get(url).status_code == 200, name
    for name in AUTHOR_PAGES:
        assert client.get(_author_page(name, estimated)).status_code == 200, name


def test_a_viewer_reads_every_page_but_is_refused_the_forms(
    viewer: User, estimated: EstimationRun, comparison: Comparison
) -> None:
    client = _client(viewer)
    for name, url in _pages(estimated, comparison).items():
        assert client.get(url).status_code == 200, name
    for name in AUTHOR_PAGES:
        response = client.get(_author_page(name, estimated))
        assert response.status_code == 403, name
        assert b"requester" in response.content


def test_another_organisation_gets_404_everywhere(
    outsider: User, estimated: EstimationRun, comparison: Comparison
) -> None:
    client = _client(outsider)
    pages = _pages(estimated, comparison)
    for name in (
        "project",
        "scenario",
        "scenario export",
        "run",
        "run status",
        "compare",
        "comparison",
    ):
        assert client.get(pages[name]).status_code == 404, name
    for name in AUTHOR_PAGES[1:]:
        assert client.get(_author_page(name, estimated)).status_code == 404, name
    run_page = reverse("planner:run-start", args=[estimated.scenario.pk])
    assert client.post(run_page).status_code == 404
    assert client.post(reverse("planner:run-retry", args=[estimated.pk])).status_code == 404
    assert estimated.scenario.runs.count() == 1


def test_the_dashboard_shows_only_the_users_projects(
    requester: User, outsider: User, estimated: EstimationRun, other_organisation: Organisation
) -> None:
    project_create(user=outsider, organisation=other_organisation, name="Globex secret model")
    body = _client(requester).get("/").content.decode()
    assert estimated.scenario.project.name in body
    assert "Globex secret model" not in body
    cost = Decimal(_budget(estimated)["cost"]["p50"])
    assert f"{cost:,.0f}" in body  # the latest figure, in the project's currency


def test_the_dashboard_makes_as_many_queries_for_three_projects_as_for_one(
    requester: User,
    organisation: Organisation,
    estimated: EstimationRun,
    django_capture_on_commit_callbacks: Capture,
    django_assert_num_queries: Any,
) -> None:
    client = _client(requester)
    with CaptureQueriesContext(connection) as one:
        client.get("/")
    for name in ("Second model", "Third model"):
        project = project_create(user=requester, organisation=organisation, name=name)
        scenario = _add_scenario(requester, project, "H100", "H100-SXM", 64, list_price("H100-SXM"))
        _finished_run(django_capture_on_commit_callbacks, requester, scenario)
    with django_assert_num_queries(len(one.captured_queries)):
        body = client.get("/").content.decode()
    assert "Third model" in body


def test_the_project_page_makes_as_many_queries_for_three_scenarios_as_for_one(
    requester: User,
    project: Project,
    estimated: EstimationRun,
    django_capture_on_commit_callbacks: Capture,
    django_assert_num_queries: Any,
) -> None:
    client = _client(requester)
    with CaptureQueriesContext(connection) as one:
        client.get(project.get_absolute_url())
    for name, gpus in (("H100 x128", 128), ("H100 x32", 32)):
        scenario = _add_scenario(requester, project, name, "H100-SXM", gpus, list_price("H100-SXM"))
        _finished_run(django_capture_on_commit_callbacks, requester, scenario)
    with django_assert_num_queries(len(one.captured_queries)):
        body = client.get(project.get_absolute_url()).content.decode()
    assert "H100 x32" in body


def test_anonymous_visitors_are_sent_to_log_in(client: Client, project: Project) -> None:
    response = client.get(reverse("planner:project-detail", args=[project.pk]))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


# --- Projects -------------------------------------------------------------------------------


def _project_form(organisation: Organisation, **changes: Any) -> dict[str, Any]:
    return {
        "organisation": organisation.pk,
        "name": "Mixtral fine-tune",
        "goal": "Instruction-tune Mixtral for support tickets.",
        "deadline": "2027-03-31",
        "budget_ceiling": "250000",
        "currency": "EUR",
        **changes,
    }


def test_a_requester_creates_a_project_through_the_form(
    requester: User, organisation: Organisation
) -> None:
    response = _client(requester).post(
        reverse("planner:project-create"), _project_form(organisation)
    )
    project = Project.objects.get(name="Mixtral fine-tune")
    assert response.status_code == 302
    assert response["Location"] == project.get_absolute_url()
    assert (project.organisation, project.owner, project.currency) == (
        organisation,
        requester,
        "EUR",
    )
    assert project.budget_ceiling == Decimal(250000)
    assert str(project.deadline) == "2027-03-31"


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"budget_ceiling": "-5"}, "budget_ceiling", "must be positive"),
        ({"currency": "XYZ"}, "currency", "unknown currency"),
        ({"name": "   "}, "name", "required"),
        ({"deadline": "31/02/2027"}, "deadline", "valid date"),
    ],
)
def test_a_bad_project_shows_the_error_on_its_field_and_writes_nothing(
    requester: User, organisation: Organisation, changes: dict[str, str], field: str, message: str
) -> None:
    response = _client(requester).post(
        reverse("planner:project-create"), _project_form(organisation, **changes)
    )
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert field in errors, errors
    assert message in " ".join(errors[field]).lower()
    assert not Project.objects.exists()


def test_a_duplicate_project_name_is_refused_on_the_name_field(
    requester: User, organisation: Organisation, project: Project
) -> None:
    response = _client(requester).post(
        reverse("planner:project-create"), _project_form(organisation, name=project.name)
    )
    assert "exists" in response.context["form"].errors["name"][0]
    assert Project.objects.count() == 1


def test_a_viewer_cannot_create_a_project(viewer: User, organisation: Organisation) -> None:
    client = _client(viewer)
    assert client.get(reverse("planner:project-create")).status_code == 403
    response = client.post(reverse("planner:project-create"), _project_form(organisation))
    assert response.status_code == 403
    assert b"Only a requester" in response.content
    assert not Project.objects.exists()


def test_a_requester_cannot_create_in_an_organisation_they_only_view(
    requester: User, organisation: Organisation, other_organisation: Organisation
) -> None:
    membership_grant(organisation=other_organisation, user=requester, role="viewer")
    response = _client(requester).post(
        reverse("planner:project-create"), _project_form(other_organisation)
    )
    assert response.status_code == 200
    assert "organisation" in response.context["form"].errors
    assert not Project.objects.exists()


def test_the_project_page_shows_runs_figures_and_the_ceiling(
    requester: User, project: Project, estimated: EstimationRun
) -> None:
    project.budget_ceiling = Decimal(1)  # far below any training run: every scenario is over
    project.save()
    body = _client(requester).get(project.get_absolute_url()).content.decode()
    assert estimated.scenario.name in body
    budget = _budget(estimated)
    assert f"{Decimal(budget['cost']['p90']):,.0f}" in body
    assert f"{budget['training_days']['p50']:.1f}" in body
    assert 'data-testid="over-ceiling"' in body
    assert 'data-testid="run-button"' in body


def _project_values(project: Project) -> tuple[Any, ...]:
    project.refresh_from_db()
    return (project.name, project.goal, project.deadline, project.budget_ceiling, project.currency)


def test_a_requester_edits_a_project_through_the_form(
    requester: User, organisation: Organisation, project: Project
) -> None:
    client = _client(requester)
    body = client.get(project.get_absolute_url()).content.decode()
    url = reverse("planner:project-edit", args=[project.pk])
    assert f'href="{url}"' in body
    page = client.get(url)
    assert page.context["form"].initial["name"] == project.name
    assert "organisation" not in page.context["form"].fields  # a project stays where it is
    response = client.post(url, _project_form(organisation, name="Llama 3 8B, second pass"))
    assert response.status_code == 302
    assert response["Location"] == project.get_absolute_url()
    assert _project_values(project) == (
        "Llama 3 8B, second pass",
        "Instruction-tune Mixtral for support tickets.",
        date(2027, 3, 31),
        Decimal(250000),
        "EUR",
    )
    assert project.organisation == organisation


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"budget_ceiling": "-5"}, "budget_ceiling", "must be positive"),
        ({"currency": "XYZ"}, "currency", "unknown currency"),
        ({"name": "   "}, "name", "required"),
        ({"name": "Taken"}, "name", "exists"),
        ({"deadline": "31/02/2027"}, "deadline", "valid date"),
    ],
)
def test_a_bad_project_edit_shows_the_error_on_its_field_and_changes_nothing(
    requester: User,
    organisation: Organisation,
    project: Project,
    changes: dict[str, str],
    field: str,
    message: str,
) -> None:
    project_create(user=requester, organisation=organisation, name="Taken")
    before = _project_values(project)
    response = _client(requester).post(
        reverse("planner:project-edit", args=[project.pk]), _project_form(organisation, **changes)
    )
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert field in errors, errors
    assert message in " ".join(errors[field]).lower()
    assert _project_values(project) == before


def test_a_viewer_cannot_edit_or_delete_a_project(
    viewer: User, organisation: Organisation, project: Project
) -> None:
    client = _client(viewer)
    body = client.get(project.get_absolute_url()).content.decode()
    assert 'data-testid="edit-project"' not in body
    assert 'data-testid="delete-project"' not in body
    before = _project_values(project)
    edit = reverse("planner:project-edit", args=[project.pk])
    response = client.post(edit, _project_form(organisation, name="Renamed by a viewer"))
    assert response.status_code == 403
    assert b"Only a requester" in response.content
    delete = reverse("planner:project-delete", args=[project.pk])
    assert client.post(delete).status_code == 403
    assert _project_values(project) == before


def test_another_organisation_cannot_edit_or_delete(
    outsider: User, organisation: Organisation, scenario: Scenario
) -> None:
    project = scenario.project
    before = _project_values(project)
    client = _client(outsider)
    edit = reverse("planner:project-edit", args=[project.pk])
    assert client.post(edit, _project_form(organisation, name="Hijacked")).status_code == 404
    assert client.post(reverse("planner:project-delete", args=[project.pk])).status_code == 404
    assert client.post(reverse("planner:scenario-delete", args=[scenario.pk])).status_code == 404
    assert _project_values(project) == before
    assert Scenario.objects.filter(pk=scenario.pk).exists()


# --- Scenarios ------------------------------------------------------------------------------


def _scenario_form(price: Any, /, **changes: Any) -> dict[str, Any]:
    source = "vendor_quote" if price.__class__.__name__ == "VendorQuote" else "price_entry"
    return {
        "name": "H100 at list price",
        "description": "",
        "model_preset": "llama3-8b",
        "tokens": "200B",
        "seq_len": "8192",
        "global_batch_size": "512",
        "precision": "bf16",
        "accelerator": "H100-SXM",
        "num_gpus": "64",
        "parallelism_mode": "auto",
        "zero_stage": "1",
        "recompute": "selective",
        "framework_overhead": "0.10",
        "network_jitter": "0.05",
        "pue": "1.20",
        "utilisation_low": "0.900",
        "utilisation_high": "1.000",
        "price": f"{source}:{price.pk}",
        **changes,
    }


def test_a_scenario_is_created_through_the_form_in_the_contract_format(
    requester: User, project: Project, prices: None
) -> None:
    price = list_price("H100-SXM")
    url = reverse("planner:scenario-create", args=[project.pk])
    response = _client(requester).post(url, _scenario_form(price, seq_len="4096"))
    scenario = Scenario.objects.get()
    assert response.status_code == 302
    assert response["Location"] == scenario.get_absolute_url()
    preset = load_presets()["llama3-8b"]
    assert scenario.spec == {
        "format_version": 1,
        "model": {**preset.model, "seq_len": 4096},
        "training": {"tokens": 2e11, "global_batch_size": 512, "precision": "bf16"},
        "cluster": {"accelerator": "H100-SXM", "num_gpus": 64},
        "parallelism": "auto",
        "margins": {"framework_overhead": 0.10, "network_jitter": 0.05},
    }
    assert (scenario.model_preset, scenario.price_entry) == ("llama3-8b", price)


def test_a_custom_model_with_an_explicit_layout(
    requester: User, project: Project, prices: None
) -> None:
    custom = {
        "model_preset": "custom",
        "model_name": "Tiny 1B",
        "num_layers": "16",
        "hidden_size": "2048",
        "num_attention_heads": "16",
        "num_kv_heads": "",
        "ffn_hidden_size": "",
        "vocab_size": "32000",
        "gated_mlp": "on",
        "seq_len": "2048",
        "tokens": "1T",
        "global_batch_size": "1024",
        "parallelism_mode": "manual",
        "tp": "2",
        "pp": "2",
        "micro_batch_size": "2",
        "zero_stage": "2",
        "recompute": "none",
    }
    url = reverse("planner:scenario-create", args=[project.pk])
    response = _client(requester).post(url, _scenario_form(list_price("H100-SXM"), **custom))
    assert response.status_code == 302, response.context["form"].errors
    spec = Scenario.objects.get().spec
    assert spec["model"] == {
        "name": "Tiny 1B",
        "num_layers": 16,
        "hidden_size": 2048,
        "num_attention_heads": 16,
        "vocab_size": 32000,
        "seq_len": 2048,
        "gated_mlp": True,
        "tied_embeddings": False,
    }
    assert spec["parallelism"] == {
        "tp": 2, "pp": 2, "dp": 16, "cp": 1, "ep": 1,
        "micro_batch_size": 2, "zero_stage": 2, "recompute": "none",
    }  # fmt: skip
    assert Scenario.objects.get().model_preset == ""


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        # The estimator's validation, reported on the form field of the key it names.
        (
            {"model_preset": "custom", "num_layers": "8", "hidden_size": "1000",
             "num_attention_heads": "16", "vocab_size": "32000"},
            "hidden_size",
            "divisible by num_attention_heads",
        ),
        (
            {"parallelism_mode": "manual", "tp": "8", "pp": "1", "dp": "4",
             "micro_batch_size": "1"},
            "parallelism_mode",
            "must equal cluster.num_gpus",
        ),
        ({"price": "price_entry:A100"}, "price", "select a valid choice"),
        ({"price": ""}, "price", "required"),
        ({"tokens": "lots"}, "tokens", "such as 2t"),
        ({"utilisation_low": "0.05"}, "utilisation_low", "0.1 <= low"),
        ({"pue": "5"}, "pue", "between 1 and 3"),
        ({"model_preset": "custom", "num_layers": ""}, "num_layers", "required"),
    ],
)  # fmt: skip
def test_bad_scenario_input_shows_the_field_error_and_writes_nothing(
    requester: User,
    project: Project,
    prices: None,
    changes: dict[str, str],
    field: str,
    message: str,
) -> None:
    url = reverse("planner:scenario-create", args=[project.pk])
    response = _client(requester).post(url, _scenario_form(list_price("H100-SXM"), **changes))
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert field in errors, errors
    assert message in " ".join(errors[field]).lower()
    assert not Scenario.objects.exists()


def test_a_price_for_another_accelerator_is_refused_on_the_price_field(
    requester: User, project: Project, prices: None
) -> None:
    url = reverse("planner:scenario-create", args=[project.pk])
    form = _scenario_form(list_price("A100-80GB-SXM", provider="aws"))
    response = _client(requester).post(url, form)
    assert "the scenario trains on H100-SXM" in response.context["form"].errors["price"][0]
    assert not Scenario.objects.exists()


def test_the_edit_form_keeps_what_it_does_not_show(requester: User, scenario: Scenario) -> None:
    spec = {**scenario.spec, "cluster": {**scenario.spec["cluster"], "gpus_per_node": 4}}
    Scenario.objects.filter(pk=scenario.pk).update(spec=spec)
    client = _client(requester)
    url = reverse("planner:scenario-edit", args=[scenario.pk])
    form = client.get(url).context["form"]
    shown = {name: form[name].value() for name in form.fields}  # what the page fills in
    data = {k: ("on" if v is True else v) for k, v in shown.items() if v not in (None, False)}
    data["num_gpus"] = "128"
    response = client.post(url, data)
    assert response.status_code == 302, response.context["form"].errors
    scenario.refresh_from_db()
    assert scenario.spec["cluster"] == {
        "accelerator": "H100-SXM",
        "num_gpus": 128,
        "gpus_per_node": 4,
    }
    assert scenario.spec["model"] == spec["model"]
    assert scenario.model_preset == "llama3-8b"


def test_the_json_editor_reports_the_key_at_fault_and_changes_nothing(
    requester: User, scenario: Scenario
) -> None:
    client = _client(requester)
    url = reverse("planner:scenario-json", args=[scenario.pk])
    before = scenario.spec
    response = client.post(url, {"spec": "{not json"})
    assert "Not valid JSON" in response.context["form"].errors["spec"][0]
    broken = {**before, "model": {**before["model"], "num_layers": -3}}
    response = client.post(url, {"spec": json.dumps(broken)})
    assert response.context["form"].errors["spec"] == [
        "model.num_layers: must be a positive integer, got -3"
    ]
    scenario.refresh_from_db()
    assert scenario.spec == before


def test_the_json_editor_saves_a_mixture_of_experts_model(
    requester: User, scenario: Scenario
) -> None:
    moe = {"num_experts": 8, "top_k": 2, "expert_ffn_hidden_size": 14336}
    spec = {**scenario.spec, "model": {**scenario.spec["model"], "moe": moe}}
    url = reverse("planner:scenario-json", args=[scenario.pk])
    response = _client(requester).post(url, {"spec": json.dumps(spec)})
    assert response.status_code == 302
    scenario.refresh_from_db()
    assert scenario.spec["model"]["moe"] == moe
    assert scenario.model_preset == ""  # no longer the preset's model


def test_json_export_and_import_round_trip_through_the_pages(
    requester: User, scenario: Scenario
) -> None:
    client = _client(requester)
    response = client.get(reverse("planner:scenario-export", args=[scenario.pk]))
    assert (
        response["Content-Disposition"] == 'attachment; filename="h100-list-price.trainplan.json"'
    )
    document = json.loads(response.content)
    document["name"] = "H100 list price (copy)"
    upload = SimpleUploadedFile("copy.json", json.dumps(document).encode(), "application/json")
    url = reverse("planner:scenario-import", args=[scenario.project.pk])
    response = client.post(url, {"file": upload, "document": ""})
    copy = Scenario.objects.get(name="H100 list price (copy)")
    assert response["Location"] == copy.get_absolute_url()
    assert (copy.spec, copy.price_entry, copy.pue) == (
        scenario.spec,
        scenario.price_entry,
        scenario.pue,
    )
    document["name"] = "Pasted copy"
    response = client.post(url, {"document": json.dumps(document)})
    assert response.status_code == 302
    assert Scenario.objects.filter(name="Pasted copy").exists()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"price_id": 999999}, "price_id: no price_entry with id 999999"),
        ({"format": "something-else"}, "format: is not a trainplan-scenario document"),
        ({"scenario": {"format_version": 1}}, "scenario.model: is required"),
        ({"name": "H100 list price"}, "exists in this project"),
        ({"pue": "NaN"}, "pue: must be a finite number"),
        ({"utilisation": ["0.9", "Infinity"]}, "utilisation: must be a finite number"),
        ({"utilisation": ["lots", "1"]}, "utilisation: must be a number"),
    ],
)
def test_a_bad_import_names_the_key_and_writes_nothing(
    requester: User, scenario: Scenario, change: dict[str, Any], message: str
) -> None:
    client = _client(requester)
    document = json.loads(
        client.get(reverse("planner:scenario-export", args=[scenario.pk])).content
    )
    document.update({"name": "Imported", **change})
    url = reverse("planner:scenario-import", args=[scenario.project.pk])
    response = client.post(url, {"document": json.dumps(document)})
    assert response.status_code == 200
    assert any(message in error for error in response.context["form"].non_field_errors())
    assert Scenario.objects.count() == 1


def test_an_import_that_is_not_json_is_refused(requester: User, project: Project) -> None:
    url = reverse("planner:scenario-import", args=[project.pk])
    response = _client(requester).post(url, {"document": "scenario: yes"})
    assert "Not valid JSON" in response.context["form"].non_field_errors()[0]


# --- Runs -----------------------------------------------------------------------------------


def test_a_run_starts_from_the_page_and_its_status_follows_it(
    requester: User, scenario: Scenario, django_capture_on_commit_callbacks: Capture
) -> None:
    client = _client(requester)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(reverse("planner:run-start", args=[scenario.pk]))
    run = EstimationRun.objects.get()
    assert response["Location"] == run.get_absolute_url()
    assert len(callbacks) == 1  # the task is queued only once the row is committed
    status_url = reverse("planner:run-status", args=[run.pk])
    assert client.get(status_url).json() == {
        "id": run.pk,
        "status": "queued",
        "status_label": "Queued",
        "progress": 0.0,
        "progress_message": "",
        "error": "",
        "finished": False,
        "url": run.get_absolute_url(),
    }
    page = client.get(run.get_absolute_url()).content.decode()
    assert f'data-run-status-url="{status_url}"' in page  # the live progress bar polls it
    run_execute(run_id=run.pk)
    status = client.get(status_url)
    assert status["Cache-Control"].startswith("max-age=0")
    assert (status.json()["status"], status.json()["progress"]) == ("succeeded", 1.0)
    assert status.json()["finished"] is True


def test_the_run_page_shows_the_figures_needed_to_reproduce_it(
    requester: User, estimated: EstimationRun
) -> None:
    body = _client(requester).get(estimated.get_absolute_url()).content.decode()
    result, budget = estimated.result or {}, _budget(estimated)
    for shown in (
        f"{budget['training_days']['p10']:.1f}",
        f"{budget['training_days']['p90']:.1f}",
        f"{Decimal(budget['cost']['p50']):,.0f}",
        f"{Decimal(budget['requested']):,.0f}",
        f"{result['mfu'] * 100:.1f}",
        str(estimated.seed),
        estimated.estimator_version,
        f"<b>TP</b>{result['parallelism']['tp']}",
    ):
        assert shown in body, shown
    assert "data-run-status-url" not in body  # finished: no polling
    assert 'data-testid="memory-breakdown"' in body
    assert 'data-testid="step-breakdown"' in body


def test_the_scenario_page_converts_into_the_organisations_base_currency(
    requester: User,
    project: Project,
    scenario: Scenario,
    django_capture_on_commit_callbacks: Capture,
) -> None:
    organisation = project.organisation
    organisation.base_currency = "EUR"
    organisation.save()
    run = _finished_run(django_capture_on_commit_callbacks, requester, scenario)
    converted = _budget(run)["converted"]
    assert converted["currency"] == "EUR"
    assert "rate" in converted
    body = _client(requester).get(scenario.get_absolute_url()).content.decode()
    assert f"{Decimal(converted['p50']):,.0f}" in body
    assert converted["rate"] in body
    assert converted["rate_date"] in body


def test_a_failed_run_shows_its_reason_and_is_retried_with_the_same_seed(
    requester: User, scenario: Scenario, django_capture_on_commit_callbacks: Capture
) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        run = run_start(user=requester, scenario=scenario, seed=99, samples=400)
    # Frozen inputs the estimator refuses (as after an upgrade that tightened validation).
    inputs = json.loads(json.dumps(run.inputs))
    inputs["scenario"]["model"]["num_layers"] = -3
    EstimationRun.objects.filter(pk=run.pk).update(inputs=inputs)
    run_execute(run_id=run.pk)
    client = _client(requester)
    page = client.get(run.get_absolute_url()).content.decode()
    assert "model.num_layers: must be a positive integer, got -3" in page
    assert 'data-testid="retry-button"' in page
    status = client.get(reverse("planner:run-status", args=[run.pk])).json()
    assert (status["status"], status["finished"]) == ("failed", True)
    assert status["error"].startswith("model.num_layers")

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(reverse("planner:run-retry", args=[run.pk]))
    assert response["Location"] == run.get_absolute_url()
    assert len(callbacks) == 1
    run.refresh_from_db()
    assert (run.status, run.seed, run.error) == ("queued", 99, "")


def test_retrying_a_successful_run_is_refused_with_a_message(
    requester: User, estimated: EstimationRun
) -> None:
    client = _client(requester)
    response = client.post(reverse("planner:run-retry", args=[estimated.pk]), follow=True)
    assert "only a failed run is retried" in response.content.decode()
    estimated.refresh_from_db()
    assert estimated.status == "succeeded"


def test_a_viewer_cannot_start_or_retry_runs(viewer: User, scenario: Scenario) -> None:
    client = _client(viewer)
    response = client.post(reverse("planner:run-start", args=[scenario.pk]))
    assert response.status_code == 403
    assert b"Only a requester" in response.content
    assert not EstimationRun.objects.exists()


# --- Comparisons ----------------------------------------------------------------------------


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


def test_absurd_ids_are_not_found_rather_than_errors(requester: User, scenario: Scenario) -> None:
    client = _client(requester)
    huge = "9" * 30
    assert client.get(f"/projects/{huge}/").status_code == 404
    assert client.get(f"/runs/{huge}/status.json").status_code == 404
    url = reverse("planner:project-compare", args=[scenario.project.pk])
    body = client.get(f"{url}?scenario={huge}&scenario={scenario.pk}").content.decode()
    assert 'data-testid="pick-more"' in body
    capacity = client.get(reverse("planner:capacity"), {"scenario": huge, "deadline": "2099-01-01"})
    assert "scenario" in capacity.context["form"].errors


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


# --- Deleting projects and scenarios --------------------------------------------------------


def test_a_project_is_deleted_after_the_confirmation_step(
    requester: User, estimated: EstimationRun
) -> None:
    project = estimated.scenario.project
    client = _client(requester)
    url = reverse("planner:project-delete", args=[project.pk])
    assert f'href="{url}"' in client.get(project.get_absolute_url()).content.decode()
    confirm = client.get(url)
    assert confirm.status_code == 200
    assert 'data-testid="confirm-delete"' in confirm.content.decode()
    assert Project.objects.filter(pk=project.pk).exists()  # asking deletes nothing
    response = client.post(url, follow=True)
    assert response.redirect_chain == [(reverse("planner:project-list"), 302)]
    assert f"Deleted the project &#x27;{project.name}&#x27;" in response.content.decode()
    assert not Project.objects.filter(pk=project.pk).exists()
    assert not Scenario.objects.exists()
    assert not EstimationRun.objects.exists()


def test_a_scenario_is_deleted_after_the_confirmation_step(
    requester: User, estimated: EstimationRun
) -> None:
    scenario = estimated.scenario
    client = _client(requester)
    url = reverse("planner:scenario-delete", args=[scenario.pk])
    assert f'href="{url}"' in client.get(scenario.get_absolute_url()).content.decode()
    confirm = client.get(url).content.decode()
    assert "1 estimation run" in confirm
    assert Scenario.objects.filter(pk=scenario.pk).exists()
    response = client.post(url)
    assert response.status_code == 302
    assert response["Location"] == scenario.project.get_absolute_url()
    assert not Scenario.objects.filter(pk=scenario.pk).exists()
    assert not EstimationRun.objects.filter(pk=estimated.pk).exists()
    assert Project.objects.filter(pk=scenario.project.pk).exists()


def test_a_viewer_cannot_delete_a_scenario(viewer: User, scenario: Scenario) -> None:
    client = _client(viewer)
    assert (
        'data-testid="delete-scenario"'
        not in client.get(scenario.get_absolute_url()).content.decode()
    )
    url = reverse("planner:scenario-delete", args=[scenario.pk])
    assert client.get(url).status_code == 403
    response = client.post(url)
    assert response.status_code == 403
    assert b"Only a requester" in response.content
    assert Scenario.objects.filter(pk=scenario.pk).exists()


def test_what_a_budget_request_was_made_from_is_not_deleted(
    requester: User, estimated: EstimationRun
) -> None:
    scenario, project = estimated.scenario, estimated.scenario.project
    budget = budget_request_create(
        user=requester, run=estimated, title="Llama 3 8B on 64 H100", justification="Cheapest."
    )
    client = _client(requester)
    for url in (
        reverse("planner:scenario-delete", args=[scenario.pk]),
        reverse("planner:project-delete", args=[project.pk]),
    ):
        response = client.post(url)
        assert response.status_code == 409, url
        body = response.content.decode()
        assert 'data-testid="delete-refused"' in body
        assert "cannot be deleted: budget requests were made from its runs" in body
        assert "nothing was deleted" in body
        assert budget.get_absolute_url() in body
    assert Scenario.objects.filter(pk=scenario.pk).exists()
    assert EstimationRun.objects.filter(pk=estimated.pk).exists()
    assert BudgetRequest.objects.filter(pk=budget.pk).exists()
    assert Project.objects.filter(pk=project.pk).exists()


def test_an_edited_scenario_is_deleted_but_its_audit_trail_keeps_the_project(
    requester: User, scenario: Scenario
) -> None:
    scenario_update(user=requester, scenario=scenario, name="Renamed")
    client = _client(requester)
    assert client.post(reverse("planner:scenario-delete", args=[scenario.pk])).status_code == 302
    assert not Scenario.objects.filter(pk=scenario.pk).exists()
    assert AuditEvent.objects.filter(project=scenario.project, scenario=None).exists()
    response = client.post(reverse("planner:project-delete", args=[scenario.project.pk]))
    assert response.status_code == 409
    assert "cannot be deleted: the audit trail records its history" in response.content.decode()
    assert Project.objects.filter(pk=scenario.project.pk).exists()
