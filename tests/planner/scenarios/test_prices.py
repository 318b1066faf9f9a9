"""A scenario's price: its source, its key, how it is described and what a snapshot keeps."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from organisations.models import Organisation
from planner.scenarios.forms import ScenarioForm, price_choices
from planner.scenarios.models import Project, Scenario
from planner.scenarios.prices import (
    PRICE_MODELS,
    device_word,
    money_per_gpu_hour,
    price_describe,
    price_get,
    price_key,
    price_key_parse,
    price_record,
    price_source_of,
)
from planner.scenarios.selectors import scenarios_for
from planner.scenarios.services import price_snapshot, scenario_create
from pricing.models import PriceEntry
from pricing.selectors import onprem_profile_cost
from tests.planner.conftest import example_quote, list_price, onprem_profile, small_spec

pytestmark = pytest.mark.django_db


def _every_source() -> list[Any]:
    return [list_price("H100-SXM"), example_quote(), onprem_profile()]


def test_a_price_key_names_the_source_and_id_and_parses_back(prices: None) -> None:
    for price in _every_source():
        key = price_key(price)
        assert key == f"{price_source_of(price)}:{price.pk}"
        assert price_get(*price_key_parse(key)) == price
    assert [price_source_of(price) for price in _every_source()] == list(PRICE_MODELS)


@pytest.mark.parametrize(
    "key", ["price_entry", "price_entry:", "price_entry:x", "price_entry:-1", "quote:1", ":1", ""]
)
def test_a_malformed_price_key_is_refused(key: str) -> None:
    with pytest.raises(ValueError, match="not a price key"):
        price_key_parse(key)


def test_price_get_is_none_for_an_unknown_source_a_missing_id_or_a_non_integer(
    prices: None,
) -> None:
    entry = list_price("H100-SXM")
    assert price_get("price_entry", entry.pk) == entry
    assert price_get("vendor_quote", 10**9) is None
    assert price_get("book", entry.pk) is None
    assert price_get("price_entry", str(entry.pk)) is None


def test_a_non_price_has_no_source(organisation: Any) -> None:
    with pytest.raises(TypeError, match="not a price record"):
        price_source_of(organisation)


def test_money_per_gpu_hour_keeps_four_places_but_drops_two_trailing_zeros() -> None:
    assert money_per_gpu_hour(Decimal("3.43088125"), "USD") == "3.4309 USD/GPU-h"
    assert money_per_gpu_hour(Decimal("2.9500"), "EUR") == "2.95 EUR/GPU-h"
    assert money_per_gpu_hour(Decimal("1234.5"), "USD") == "1,234.50 USD/GPU-h"
    assert money_per_gpu_hour(Decimal("2.9510"), "USD") == "2.9510 USD/GPU-h"


def test_money_per_gpu_hour_names_the_device_it_prices() -> None:
    assert money_per_gpu_hour(Decimal("4.2"), "USD", "chip") == "4.20 USD/chip-h"


@pytest.mark.parametrize(
    ("family", "word"),
    [
        ("nvidia-hopper", "GPU"),
        ("amd-cdna3", "GPU"),
        ("google-tpu", "chip"),
        ("aws-trainium", "chip"),
        ("intel-gaudi", "accelerator"),
        ("generic", "accelerator"),
        (None, "GPU"),
    ],
)
def test_device_word_says_chip_for_a_tpu_and_gpu_for_a_gpu(family: str | None, word: str) -> None:
    assert device_word(family) == word


def test_an_entry_is_described_by_provider_region_pricing_type_and_instance(prices: None) -> None:
    entry = list_price("H100-SXM")
    described = price_describe(entry)
    name = (
        f"{entry.provider.name} {entry.region}, {entry.get_pricing_type_display()}, "
        f"{entry.instance_type}"
    )
    assert (described.source, described.kind) == ("price_entry", "Price book")
    assert (described.name, described.label) == (name, name)
    assert (described.accelerator, described.currency) == ("H100-SXM", entry.book.currency)
    assert described.price_per_gpu_hour == entry.price_per_accelerator_hour
    money = money_per_gpu_hour(entry.price_per_accelerator_hour, entry.book.currency)
    assert described.choice_label(timezone.localdate()) == f"{money} · {name} [H100-SXM]"


def test_two_entries_alike_but_for_their_instance_type_read_apart(prices: None) -> None:
    # AWS us-east-1 sells on-demand H100s as p5.48xlarge (8 GPUs) and p5.4xlarge (one), both
    # at 6.88 USD/GPU-h: without the instance type the form would list the same text twice.
    entries = PriceEntry.objects.filter(
        provider__slug="aws", region="us-east-1", accelerator__catalog_id="H100-SXM",
        pricing_type="on_demand",
    )  # fmt: skip
    today = timezone.localdate()
    labels = [price_describe(entry).choice_label(today) for entry in entries]
    assert len(labels) == 2
    assert len(set(labels)) == 2
    assert {label.split(" · ")[0] for label in labels} == {"6.88 USD/GPU-h"}
    assert any("p5.48xlarge" in label for label in labels)
    assert any("p5.4xlarge" in label for label in labels)


def test_an_entry_without_an_instance_type_is_named_without_one(prices: None) -> None:
    entry = list_price("H100-SXM")
    entry.instance_type = ""
    described = price_describe(entry)
    assert described.name == (
        f"{entry.provider.name} {entry.region}, {entry.get_pricing_type_display()}"
    )


def test_a_tpu_price_is_per_chip_hour(prices: None) -> None:
    entry = list_price("TPU-v5p")
    described = price_describe(entry)
    assert described.device == "chip"
    label = described.choice_label(timezone.localdate())
    assert label.startswith(f"{entry.price_per_accelerator_hour:.2f} USD/chip-h · ")
    assert "GPU" not in label


def test_a_quote_counts_its_accelerators_in_their_own_word(prices: None) -> None:
    quote = example_quote()
    quote.accelerator = list_price("TPU-v5p").accelerator
    assert f"(up to {quote.accelerator_count} chips, " in price_describe(quote).choice_label(
        quote.valid_from
    )


def test_a_flagged_entry_says_so_in_its_choice(prices: None) -> None:
    entry = PriceEntry.objects.exclude(data_flag="").first()
    assert entry is not None
    label = price_describe(entry).choice_label(timezone.localdate())
    assert label.endswith(" — flagged: " + entry.data_flag.split(":")[0])


def test_a_quote_is_named_by_vendor_and_reference_and_its_validity_shows(prices: None) -> None:
    quote = example_quote()
    described = price_describe(quote)
    assert (described.source, described.kind) == ("vendor_quote", "Vendor quote")
    assert described.name == f"{quote.vendor} {quote.reference}"
    assert described.label == f"{quote.vendor} quote {quote.reference}"
    assert described.accelerator == quote.accelerator.catalog_id
    assert described.price_per_gpu_hour == quote.price_per_accelerator_hour
    valid = described.choice_label(quote.valid_from)
    assert f"{quote.reference} (up to {quote.accelerator_count} GPUs, until " in valid
    assert not valid.endswith("not valid today")
    later = described.choice_label(quote.valid_until + timedelta(days=1))
    assert later.endswith(f"[{described.accelerator}] — not valid today")


def test_an_onprem_profile_costs_its_cost_of_ownership_to_the_hundredth_of_a_cent(
    prices: None,
) -> None:
    profile = onprem_profile()
    described = price_describe(profile)
    cost = onprem_profile_cost(profile=profile).price_per_gpu_hour
    assert (described.source, described.kind) == ("onprem_profile", "On-prem")
    assert (described.name, described.label) == (profile.name, f"on-prem profile '{profile.name}'")
    assert described.price_per_gpu_hour == cost.quantize(Decimal("0.0001"))
    assert described.price_per_gpu_hour != cost  # the model's figure has more places
    profile.accelerator = None
    assert price_describe(profile).accelerator == ""
    assert price_describe(profile).choice_label(timezone.localdate()).endswith(" [any]")


def test_the_form_lists_every_price_by_its_key_and_choice_label(
    prices: None, organisation: Organisation
) -> None:
    today = timezone.localdate()
    groups = price_choices(organisation=organisation)
    assert list(groups) == ["Price books", "Vendor quotes", "On-prem"]
    for choices in groups.values():
        for choice in choices:
            described = price_describe(choice.price)
            assert (choice.value, choice.label) == (described.key, described.choice_label(today))
            assert choice.accelerator == described.accelerator


@pytest.fixture
def priced(prices: None, project: Project, requester: User) -> list[Scenario]:
    """One scenario per price source."""
    return [
        scenario_create(
            user=requester,
            project=project,
            name=f"priced by {price_source_of(price)}",
            spec=small_spec(),
            price_source=price_source_of(price),
            price=price,
        )
        for price in _every_source()
    ]


def test_a_scenario_price_is_the_record_of_its_source(priced: list[Scenario]) -> None:
    for scenario, price in zip(priced, _every_source(), strict=True):
        assert Scenario.objects.get(pk=scenario.pk).price == price
        assert ScenarioForm.initial_from(scenario)["price"] == price_key(price)
    assert Scenario(name="unpriced").price is None


def test_a_snapshot_copies_the_description(priced: list[Scenario]) -> None:
    for scenario in priced:
        assert scenario.price is not None
        described = price_describe(scenario.price)
        snapshot = price_snapshot(scenario)
        assert (snapshot["source"], snapshot["id"]) == (described.source, scenario.price.pk)
        assert (snapshot["label"], snapshot["currency"]) == (described.label, described.currency)
        assert snapshot["price_per_gpu_hour"] == str(described.price_per_gpu_hour)


def test_a_listed_scenario_is_snapshot_without_further_queries(
    priced: list[Scenario], requester: User, django_assert_num_queries: Any
) -> None:
    entry_priced = scenarios_for(requester).get(pk=priced[0].pk)
    with django_assert_num_queries(0):  # the description reads only what the list loads
        snapshot = price_snapshot(entry_priced)
    assert snapshot["source"] == "price_entry"


def test_a_record_keeps_the_fields_of_the_price_as_json(prices: None, requester: User) -> None:
    entry, quote, profile = _every_source()
    record = price_record(entry)
    assert record["book"]["name"] == entry.book.name
    assert (record["provider"], record["accelerator"]) == (entry.provider.name, "H100-SXM")
    assert record["price_per_accelerator_hour"] == str(entry.price_per_accelerator_hour)
    assert price_record(quote)["valid_until"] == quote.valid_until.isoformat()
    profile.created_by = requester
    onprem = price_record(profile)
    assert onprem["name"] == profile.name
    assert onprem["accelerator"] == profile.accelerator.catalog_id
    assert onprem["pue"] == str(profile.pue)
    assert not any(name.endswith("_at") for name in onprem)
    json.dumps([record, price_record(quote), onprem])  # a snapshot is JSON
