"""Organisations, memberships and roles as one module both apps use; the add_member command;
the scenario price picker and services refusing another organisation's prices; the data
migration that gave existing prices an organisation."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from organisations.models import Organisation, Role
from organisations.selectors import user_roles
from planner.common.errors import PlannerError
from planner.scenarios.forms.prices import price_choices
from planner.scenarios.models import Project, Scenario
from planner.scenarios.services import scenario_create, scenario_update
from pricing.models import Accelerator, VendorQuote
from pricing.services import quote_create
from tests.planner.conftest import api_client, list_price, small_spec

# --- One set of models both apps use ---------------------------------------------------------


def test_the_planner_models_reexport_the_organisation_models() -> None:
    from organisations import models as organisation_models
    from planner import models

    assert models.Organisation is organisation_models.Organisation
    assert models.Membership is organisation_models.Membership
    assert Organisation._meta.app_label == "organisations"
    assert Organisation._meta.db_table == "planner_organisation"
    assert models.Membership._meta.db_table == "planner_membership"


# --- Prices of another organisation ---------------------------------------------------------


@pytest.fixture
def other_quote(prices: None, other_organisation: Organisation) -> VendorQuote:
    today = timezone.localdate()
    return quote_create(
        user=None,
        organisation=other_organisation,
        vendor="Globex Compute",
        reference="GLOBEX-1",
        accelerator=Accelerator.objects.get(catalog_id="H100-SXM"),
        accelerator_count=512,
        price_per_accelerator_hour=Decimal("0.99"),
        currency="USD",
        valid_from=today,
        valid_until=today + timedelta(days=30),
    )


def test_a_scenario_cannot_use_another_organisations_quote(
    project: Project, requester: User, other_quote: VendorQuote
) -> None:
    with pytest.raises(PlannerError) as refused:
        scenario_create(
            user=requester,
            project=project,
            name="Cheap H100",
            spec=small_spec("H100-SXM", 64),
            price_source="vendor_quote",
            price=other_quote,
        )
    assert refused.value.field == "vendor_quote"


def test_a_scenario_update_cannot_switch_to_another_organisations_quote(
    scenario: Scenario, requester: User, other_quote: VendorQuote
) -> None:
    with pytest.raises(PlannerError) as refused:
        scenario_update(
            user=requester, scenario=scenario, price_source="vendor_quote", price=other_quote
        )
    assert refused.value.field == "vendor_quote"


def test_the_api_refuses_another_organisations_quote_with_a_400_naming_it(
    project: Project, requester: User, other_quote: VendorQuote
) -> None:
    response = api_client(requester).post(
        "/api/v1/scenarios/",
        {
            "project": project.pk,
            "name": "Cheap H100",
            "spec": small_spec("H100-SXM", 64),
            "price_source": "vendor_quote",
            "vendor_quote": other_quote.pk,
        },
        format="json",
    )
    assert response.status_code == 400
    assert "vendor_quote" in response.json()


def test_the_price_picker_offers_the_organisations_own_and_public_prices_only(
    project: Project, other_quote: VendorQuote, other_organisation: Organisation
) -> None:
    def offered(organisation: Organisation) -> set[object]:
        groups = price_choices(organisation=organisation)
        return {choice.price for choices in groups.values() for choice in choices}

    ours, theirs = offered(project.organisation), offered(other_organisation)
    public_entry = list_price("H100-SXM")
    assert public_entry in ours
    assert public_entry in theirs
    assert other_quote in theirs
    assert other_quote not in ours
    demo_quote = VendorQuote.objects.get(reference="EXAMPLE-0001")
    assert demo_quote in ours
    assert demo_quote not in theirs


def test_capacity_options_leave_out_another_organisations_quotes(
    prices: None, other_quote: VendorQuote, outsider: User, requester: User
) -> None:
    from planner.capacity.search import capacity_options

    def labels(user: User) -> list[str]:
        built = capacity_options(
            book=None,
            include_quotes=True,
            include_onprem=True,
            currency="USD",
            max_gpus=512,
            on=timezone.localdate(),
            viewer=user,
        )
        return [option.label for option in built.options]

    assert any("Globex" in label for label in labels(outsider))
    assert not any("Globex" in label for label in labels(requester))


# --- The data migration ---------------------------------------------------------------------

BEFORE = [("pricing", "0002_organisation_fields")]
AFTER = [("pricing", "0004_organisation_required")]


@pytest.mark.django_db(transaction=True)
def test_the_data_migration_gives_prices_the_organisation_that_uses_them() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    try:
        apps = executor.loader.project_state(BEFORE).apps
        made = _legacy_data(apps)

        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(AFTER)
        apps = executor.loader.project_state(AFTER).apps
        quotes = apps.get_model("pricing", "VendorQuote").objects
        books = apps.get_model("pricing", "PriceBook").objects
        profiles = apps.get_model("pricing", "OnPremProfile").objects
        assert quotes.get(pk=made["used_quote"]).organisation_id == made["globex"]
        assert quotes.get(pk=made["unused_quote"]).organisation_id == made["acme"]
        assert profiles.get(pk=made["profile"]).organisation_id == made["acme"]
        assert books.get(pk=made["published"]).organisation_id is None
        assert books.get(pk=made["draft"]).organisation_id == made["globex"]
    finally:  # every later migration back, for the tests that follow
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())


def _legacy_data(apps: object) -> dict[str, int]:
    """Prices as they were before organisations owned them, with one scenario using a quote."""
    model = apps.get_model  # type: ignore[attr-defined]
    user = model("auth", "User").objects.create(username="legacy")
    globex = model("planner", "Organisation").objects.create(name="Globex", slug="globex")
    acme = model("planner", "Organisation").objects.create(name="Acme AI Research", slug="acme")
    model("planner", "Membership").objects.create(
        organisation=globex, user=user, role="pricing_admin"
    )
    h100 = model("pricing", "Accelerator").objects.create(
        catalog_id="H100-TEST", name="H100", vendor="NVIDIA", memory_gib=80,
        memory_bandwidth_tbs=3.35,
    )  # fmt: skip
    quote = {
        "vendor": "V", "accelerator": h100, "accelerator_count": 8, "price_basis": "hourly",
        "price_per_accelerator_hour": Decimal(2), "currency": "USD",
        "valid_from": date(2026, 1, 1), "valid_until": date(2026, 12, 31),
    }  # fmt: skip
    quotes = model("pricing", "VendorQuote").objects
    used, unused = quotes.create(**quote), quotes.create(**quote)
    project = model("planner", "Project").objects.create(
        organisation=globex, name="P", owner=user, currency="USD"
    )
    model("planner", "Scenario").objects.create(
        project=project, name="S", spec={}, price_source="vendor_quote", vendor_quote=used
    )
    profile = model("pricing", "OnPremProfile").objects.create(
        name="DC", server_price=1, network_share_percent=1, cost_of_capital_percent=1,
        power_per_gpu_w=1, server_power_overhead=1, average_load_percent=1, pue=1,
        electricity_price_per_kwh=1, colocation_price_per_kw_month=1,
        operations_share_percent=1, utilisation_percent=1,
    )  # fmt: skip
    book = {"currency": "USD", "source": "s", "fetched_at": timezone.now()}
    books = model("pricing", "PriceBook").objects
    published = books.create(name="List", status="published", **book)
    draft = books.create(name="Draft", status="draft", created_by=user, **book)
    ids = {"used_quote": used, "unused_quote": unused, "profile": profile, "globex": globex}
    ids |= {"acme": acme, "published": published, "draft": draft}
    return {name: record.pk for name, record in ids.items()}


@pytest.mark.django_db
def test_the_demo_makes_ivan_pricing_admin_of_the_demo_organisation() -> None:
    from organisations.demo import DEMO_ORGANISATION
    from planner.demo import demo_users_load

    demo_users_load()
    ivan = User.objects.get(username="ivan")
    organisation = Organisation.objects.get(name=DEMO_ORGANISATION)
    assert Role.PRICING_ADMIN in user_roles(ivan, organisation)
    assert Role.PRICING_ADMIN not in user_roles(User.objects.get(username="maya"), organisation)
