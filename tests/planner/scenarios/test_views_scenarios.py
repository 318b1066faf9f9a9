"""The scenario pages: the form, the JSON editor, export and import, the detail page, deletion."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import timezone

from estimator.core import estimate
from estimator.core.presets import load_presets
from planner.budgets.models import AuditEvent, BudgetRequest
from planner.budgets.services import budget_request_create
from planner.scenarios.models import EstimationRun, Project, Scenario
from planner.scenarios.prices import price_key
from planner.scenarios.services import scenario_create, scenario_update
from pricing.models import VendorQuote
from tests.planner.conftest import (
    Capture,
    _budget,
    _client,
    _finished_run,
    _form_refusal_check,
    example_quote,
    list_price,
    small_spec,
)

pytestmark = pytest.mark.django_db


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
        "zero_stage": "3",  # the default framework (Megatron-LM) offers 0, 1 and 3
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
        "micro_batch_size": 2, "zero_stage": 3, "recompute": "none",
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
    data = _scenario_form(list_price("H100-SXM"), **changes)
    _form_refusal_check(requester, project, data, field, message)


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


def test_the_edit_form_keeps_the_scenarios_quote_once_it_expired(
    requester: User, project: Project, prices: None
) -> None:
    quote = example_quote()
    scenario = scenario_create(
        user=requester, project=project, name="quoted", spec=small_spec(),
        price_source="vendor_quote", price=quote,
    )  # fmt: skip
    yesterday = timezone.localdate() - timedelta(days=1)
    VendorQuote.objects.filter(pk=quote.pk).update(
        valid_from=yesterday - timedelta(days=30), valid_until=yesterday
    )
    response = _client(requester).get(reverse("planner:scenario-edit", args=[scenario.pk]))
    form = response.context["form"]
    assert form["price"].value() == price_key(quote) == f"vendor_quote:{quote.pk}"
    quotes = dict(dict(form.fields["price"].choices)["Vendor quotes"])
    assert quotes[price_key(quote)].endswith(" — not valid today")


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


DEEP = '{"a":' * 2000 + "1" + "}" * 2000


def test_an_import_nested_2000_levels_deep_is_refused_as_a_form_error(
    requester: User, project: Project
) -> None:
    url = reverse("planner:scenario-import", args=[project.pk])
    client = _client(requester)
    pasted = client.post(url, {"document": DEEP})
    upload = SimpleUploadedFile("deep.json", DEEP.encode(), "application/json")
    uploaded = client.post(url, {"file": upload, "document": ""})
    for response in (pasted, uploaded):
        assert response.status_code == 200
        errors = response.context["form"].non_field_errors()
        assert errors == ["Not valid JSON: nested deeper than 32 levels."]
    assert not Scenario.objects.filter(project=project).exists()


def test_the_json_editor_refuses_2000_levels_and_keeps_the_spec(
    requester: User, scenario: Scenario
) -> None:
    before = scenario.spec
    url = reverse("planner:scenario-json", args=[scenario.pk])
    response = _client(requester).post(url, {"spec": DEEP})
    assert response.status_code == 200
    assert "nested deeper than 32 levels" in response.content.decode()
    scenario.refresh_from_db()
    assert scenario.spec == before


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
    # Money rounds half up on the page (planner/templatetags/numbers.py), not half to even.
    whole = Decimal(converted["p50"]).quantize(Decimal(1), rounding=ROUND_HALF_UP)
    assert f"{whole:,}" in body
    assert converted["rate"] in body
    assert converted["rate_date"] in body


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


def test_the_command_line_estimates_the_pages_export_as_it_is(
    scenario: Scenario, requester: User, tmp_path: Path
) -> None:
    export = _client(requester).get(reverse("planner:scenario-export", args=[scenario.pk]))
    path = tmp_path / "export.json"
    path.write_bytes(export.content)
    done = subprocess.run(
        [sys.executable, "-m", "estimator", "estimate", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    direct = estimate(scenario.spec)
    assert printed["training_days"] == pytest.approx(direct["training_days"], rel=1e-9)
    assert printed["memory_verdict"] == direct["memory_verdict"]
