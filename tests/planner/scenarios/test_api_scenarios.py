"""Scenarios over the API: the contract's JSON, its price, field-level 400s, export/import."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from planner.scenarios.models import Project, Scenario
from planner.scenarios.services import scenario_create
from pricing.models import VendorQuote
from tests.planner.conftest import example_quote, list_price, onprem_profile, small_spec

pytestmark = pytest.mark.django_db

SCENARIOS = "/api/v1/scenarios/"
JSON = "application/json"
Payload = Callable[..., dict[str, Any]]


def _spec_with(section: str, key: str, value: Any) -> dict[str, Any]:
    spec = small_spec("H100-SXM", 128)
    spec[section][key] = value
    return spec


def test_scenario_create_returns_it_with_its_price(
    requester_api: APIClient, scenario_payload: Payload
) -> None:
    response = requester_api.post(SCENARIOS, scenario_payload(model_preset="llama3-8b"))
    assert response.status_code == 201, response.json()
    body = response.json()
    entry = list_price("H100-SXM")
    assert (body["accelerator"], body["num_gpus"], body["price_source"]) == (
        "H100-SXM",
        128,
        "price_entry",
    )
    assert body["spec"] == small_spec("H100-SXM", 128)
    assert (body["price_entry"], body["vendor_quote"], body["onprem_profile"]) == (
        entry.pk,
        None,
        None,
    )
    price = body["price"]
    assert (price["source"], price["id"], price["currency"]) == ("price_entry", entry.pk, "USD")
    assert Decimal(price["price_per_gpu_hour"]) == entry.price_per_accelerator_hour
    assert (body["pue"], body["utilisation_low"], body["utilisation_high"]) == (
        "1.20",
        "0.900",
        "1.000",
    )
    stored = Scenario.objects.get(pk=body["id"])
    assert stored.created_by is not None
    assert (stored.name, stored.price_entry_id, stored.created_by.username) == (
        "H100 on 128",
        entry.pk,
        "maya",
    )


def test_scenario_create_with_a_quote_or_an_onprem_profile(
    requester_api: APIClient, scenario_payload: Payload
) -> None:
    quote = requester_api.post(
        SCENARIOS,
        scenario_payload(
            name="quoted",
            price_source="vendor_quote",
            price_entry=None,
            vendor_quote=example_quote().pk,
        ),
    )
    assert quote.status_code == 201, quote.json()
    assert quote.json()["price"]["source"] == "vendor_quote"
    onprem = requester_api.post(
        SCENARIOS,
        scenario_payload(
            name="owned",
            price_source="onprem_profile",
            price_entry=None,
            onprem_profile=onprem_profile().pk,
        ),
    )
    assert onprem.status_code == 201, onprem.json()
    assert onprem.json()["price"]["price_per_gpu_hour"] == "2.6481"


BAD_SCENARIOS: list[tuple[Callable[[], dict[str, Any]], str, str]] = [
    (lambda: {"spec": _spec_with("model", "num_layers", -3)}, "spec.model.num_layers", "-3"),
    (lambda: {"spec": _spec_with("training", "precision", "int3")}, "spec.training.precision", ""),
    (
        lambda: {"spec": _spec_with("cluster", "accelerator", "H999")},
        "spec.cluster.accelerator",
        "",
    ),
    (lambda: {"spec": _spec_with("model", "name", "Llama\x00")}, "spec", "Null characters"),
    (lambda: {"spec": "a scenario"}, "spec", "JSON object"),
    (lambda: {"spec": [1, 2]}, "spec", "JSON object"),
    (lambda: {"price_source": "spot_market"}, "price_source", "not a valid choice"),
    (lambda: {"price_entry": list_price("A100-80GB-SXM").pk}, "price_entry", "trains on H100-SXM"),
    (lambda: {"price_entry": 999_999}, "price_entry", "does not exist"),
    (lambda: {"price_entry": "cheap"}, "price_entry", "Incorrect type"),
    (lambda: {"price_entry": None}, "price_entry", "is required"),
    (
        lambda: {"price_source": "vendor_quote", "price_entry": None},
        "vendor_quote",
        "is required",
    ),
    (
        lambda: {"vendor_quote": example_quote().pk},
        "vendor_quote",
        "must be empty when the price source is price_entry",
    ),
    (
        lambda: {
            "price_source": "vendor_quote",
            "price_entry": None,
            "vendor_quote": example_quote().pk,
            "spec": small_spec("H100-SXM", 512),
        },
        "vendor_quote",
        "covers 256 accelerators; the scenario uses 512",
    ),
    (lambda: {"name": ""}, "name", "may not be blank"),
    (lambda: {"name": "H100 list price"}, "name", "exists in this project"),
    (lambda: {"name": "x" * 201}, "name", "no more than 200"),
    (lambda: {"pue": "abc"}, "pue", "valid number"),
    (lambda: {"pue": "4"}, "pue", "between 1 and 3"),
    (lambda: {"utilisation_low": "0.05"}, "utilisation_low", "0.1 <= low"),
    (lambda: {"project": 999_999}, "project", "does not exist"),
]


@pytest.mark.parametrize(("changes", "field", "reason"), BAD_SCENARIOS)
def test_scenario_bad_input_is_a_400_naming_the_field(
    requester_api: APIClient,
    scenario_payload: Payload,
    scenario: Scenario,
    changes: Callable[[], dict[str, Any]],
    field: str,
    reason: str,
) -> None:
    response = requester_api.post(SCENARIOS, scenario_payload(**changes()))
    assert response.status_code == 400
    body = response.json()
    assert field in body, body
    assert reason in " ".join(body[field])
    assert Scenario.objects.count() == 1


def test_scenario_with_an_expired_quote_is_a_400(
    requester_api: APIClient, scenario_payload: Payload, expired_quote: VendorQuote
) -> None:
    payload = scenario_payload(
        price_source="vendor_quote", price_entry=None, vendor_quote=expired_quote.pk
    )
    response = requester_api.post(SCENARIOS, payload)
    assert response.status_code == 400
    assert "is expired" in response.json()["vendor_quote"][0]
    assert not Scenario.objects.exists()


def test_scenario_malformed_json_is_a_400(requester_api: APIClient, project: Project) -> None:
    response = requester_api.generic(
        "POST", SCENARIOS, '{"project": 1, "spec": {', content_type="application/json"
    )
    assert response.status_code == 400
    assert "JSON parse error" in response.json()["detail"]
    nan = requester_api.generic(
        "POST",
        SCENARIOS,
        '{"spec": {"training": {"tokens": NaN}}}',
        content_type="application/json",
    )
    assert nan.status_code == 400
    infinite = requester_api.generic(
        "POST",
        SCENARIOS,
        '{"spec": {"training": {"tokens": 1e999}}}',
        content_type="application/json",
    )
    assert infinite.status_code == 400
    assert "spec" in infinite.json()
    deep = requester_api.generic(
        "POST", SCENARIOS, "[" * 100_000 + "]" * 100_000, content_type="application/json"
    )
    assert deep.status_code == 400
    assert "nested deeper than 32 levels" in deep.json()["detail"]
    assert not Scenario.objects.exists()


def test_scenario_update_changes_the_spec_and_the_price(
    requester_api: APIClient, scenario: Scenario
) -> None:
    url = f"{SCENARIOS}{scenario.pk}/"
    bigger = requester_api.patch(url, {"spec": small_spec("H100-SXM", 256)})
    assert bigger.status_code == 200, bigger.json()
    assert bigger.json()["num_gpus"] == 256
    owned = requester_api.patch(
        url, {"price_source": "onprem_profile", "onprem_profile": onprem_profile().pk}
    )
    assert owned.status_code == 200, owned.json()
    scenario.refresh_from_db()
    assert (scenario.price_source, scenario.price_entry_id, scenario.num_gpus) == (
        "onprem_profile",
        None,
        256,
    )
    assert owned.json()["price"]["source"] == "onprem_profile"


def test_scenario_update_with_a_bad_spec_changes_nothing(
    requester_api: APIClient, scenario: Scenario
) -> None:
    url = f"{SCENARIOS}{scenario.pk}/"
    spec = small_spec("H100-SXM", 64)
    spec["parallelism"] = {
        "tp": 3,
        "pp": 1,
        "dp": 1,
        "micro_batch_size": 1,
        "zero_stage": 1,
        "recompute": "none",
    }
    response = requester_api.patch(url, {"name": "renamed", "spec": spec})
    assert response.status_code == 400
    assert "must equal cluster.num_gpus = 64" in response.json()["spec.parallelism"][0]
    price_only = requester_api.patch(url, {"price_entry": list_price("H100-SXM").pk})
    assert price_only.status_code == 400
    assert "price_source" in price_only.json()
    other_accelerator = requester_api.patch(url, {"spec": small_spec("A100-80GB-SXM", 64)})
    assert other_accelerator.status_code == 400
    assert "trains on A100-80GB-SXM" in other_accelerator.json()["price_entry"][0]
    scenario.refresh_from_db()
    assert (scenario.name, scenario.spec) == ("H100 list price", small_spec("H100-SXM", 64))


def test_scenario_delete(requester_api: APIClient, scenario: Scenario) -> None:
    assert requester_api.delete(f"{SCENARIOS}{scenario.pk}/").status_code == 204
    assert not Scenario.objects.exists()


def test_scenario_list_filters_by_project(
    requester: User, requester_api: APIClient, scenario: Scenario
) -> None:
    from planner.scenarios.services import project_create

    other = project_create(user=requester, organisation=scenario.project.organisation, name="B")
    scenario_create(
        user=requester,
        project=other,
        name="elsewhere",
        spec=small_spec(),
        price_source="price_entry",
        price=list_price("H100-SXM"),
    )
    body = requester_api.get(f"{SCENARIOS}?project={scenario.project_id}").json()
    assert [row["id"] for row in body["results"]] == [scenario.pk]
    assert requester_api.get(SCENARIOS).json()["count"] == 2


def test_scenario_export_import_round_trip(
    requester_api: APIClient, scenario: Scenario, project: Project
) -> None:
    exported = requester_api.get(f"{SCENARIOS}{scenario.pk}/export/")
    assert exported.status_code == 200
    document = exported.json()
    assert (document["format"], document["version"], document["price_id"]) == (
        "trainplan-scenario",
        1,
        scenario.price_entry_id,
    )
    import_url = f"/api/v1/projects/{project.pk}/scenarios/import/"
    duplicate = requester_api.post(import_url, document)
    assert duplicate.status_code == 400
    assert "exists" in duplicate.json()["name"][0]
    response = requester_api.post(import_url, document | {"name": "imported copy"})
    assert response.status_code == 201, response.json()
    copy = Scenario.objects.get(pk=response.json()["id"])
    assert (copy.project_id, copy.spec, copy.price_entry_id, copy.pue) == (
        project.pk,
        scenario.spec,
        scenario.price_entry_id,
        scenario.pue,
    )
    assert (copy.model_preset, copy.utilisation_low) == ("llama3-8b", scenario.utilisation_low)
    again = requester_api.get(f"{SCENARIOS}{copy.pk}/export/").json()
    assert again == document | {"name": "imported copy"}


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"format": "something-else"}, "format"),
        ({"version": 2}, "version"),
        ({"price_id": 999_999}, "price_id"),
        ({"price_id": "one"}, "price_id"),
        ({"utilisation": ["0.9"]}, "utilisation"),
        ({"scenario": {"format_version": 1}}, "spec.model"),
    ],
)
def test_scenario_import_of_a_bad_document_is_a_400_naming_the_key(
    requester_api: APIClient,
    scenario: Scenario,
    project: Project,
    changes: dict[str, Any],
    field: str,
) -> None:
    document = requester_api.get(f"{SCENARIOS}{scenario.pk}/export/").json()
    url = f"/api/v1/projects/{project.pk}/scenarios/import/"
    response = requester_api.post(url, document | {"name": "copy"} | changes)
    assert response.status_code == 400
    assert field in response.json(), response.json()
    assert Scenario.objects.count() == 1


def test_scenario_list_runs_a_fixed_number_of_queries(
    requester: User,
    requester_api: APIClient,
    project: Project,
    scenario: Scenario,
    django_assert_max_num_queries: Any,
) -> None:
    def listed() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert requester_api.get(SCENARIOS).status_code == 200
        return len(queries)

    before = listed()
    prices: list[tuple[str, Any]] = [
        ("price_entry", list_price("H100-SXM")),
        ("vendor_quote", example_quote()),
        ("onprem_profile", onprem_profile()),
    ]
    for number in range(9):
        source, price = prices[number % 3]
        scenario_create(
            user=requester,
            project=project,
            name=f"variant {number}",
            spec=small_spec(),
            price_source=source,
            price=price,
        )
    # One count for the pagination, one select joining the project and every price source.
    with django_assert_max_num_queries(2):
        response = requester_api.get(SCENARIOS)
    assert response.json()["count"] == 10
    assert {row["price"]["source"] for row in response.json()["results"]} == {
        "price_entry",
        "vendor_quote",
        "onprem_profile",
    }
    assert listed() == before
