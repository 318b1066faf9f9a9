"""The grid carbon intensity of an on-prem profile: optional, 0 to 2000 gCO2e/kWh, saved
through the service, the API, the calculator's save form and the admin."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from organisations.models import Organisation
from pricing.demo import WORKED_EXAMPLE, WORKED_EXAMPLE_NAME, pricing_demo_load
from pricing.errors import PricingError
from pricing.models import OnPremProfile, PriceAuditEvent
from pricing.services import onprem_profile_create, onprem_profile_update
from pricing.services.onprem import GRID_FIELD, PROFILE_FIELDS
from pricing.tco import INPUT_FIELDS

pytestmark = pytest.mark.django_db

API_URL = "/api/v1/onprem-profiles/"
SAVE_URL = "/pricing/onprem/save/"
API_FIELDS = {name: str(value) for name, value in WORKED_EXAMPLE.items() if name != "source"}
OUT_OF_RANGE = ["-0.1", "-1", "2000.1", "2500", "99999"]


def _create(organisation: Organisation, **changes: Any) -> OnPremProfile:
    values: dict[str, Any] = dict(WORKED_EXAMPLE) | {"name": "Our cluster"} | changes
    return onprem_profile_create(user=None, organisation=organisation, **values)


def test_the_field_is_a_profile_field_but_not_a_cost_input() -> None:
    assert GRID_FIELD == "grid_gco2e_per_kwh"
    assert GRID_FIELD in PROFILE_FIELDS
    assert GRID_FIELD not in INPUT_FIELDS


# --- Service --------------------------------------------------------------------------------


def test_a_profile_needs_no_grid_intensity(organisation: Organisation) -> None:
    profile = _create(organisation)
    profile.refresh_from_db()
    assert profile.grid_gco2e_per_kwh is None


@pytest.mark.parametrize("value", [Decimal("412.7"), "412.7", 412.7, "0", 0, "2000", "2000.0"])
def test_the_service_saves_a_value_from_0_to_2000(organisation: Organisation, value: Any) -> None:
    profile = _create(organisation, grid_gco2e_per_kwh=value)
    profile.refresh_from_db()
    assert profile.grid_gco2e_per_kwh == Decimal(str(value))
    created = PriceAuditEvent.objects.get(action="created", subject_id=profile.pk)
    assert GRID_FIELD in created.changes


@pytest.mark.parametrize("value", [*OUT_OF_RANGE, "lots", "NaN", "Infinity", "412.75", True])
def test_the_service_refuses_a_bad_value_naming_the_field(
    organisation: Organisation, value: Any
) -> None:
    with pytest.raises(PricingError) as raised:
        _create(organisation, grid_gco2e_per_kwh=value)
    assert raised.value.field == GRID_FIELD
    assert not OnPremProfile.objects.filter(name="Our cluster").exists()


def test_the_range_is_named_in_the_message(organisation: Organisation) -> None:
    with pytest.raises(PricingError, match="must be from 0 to 2000 gCO2e/kWh, got 2500"):
        _create(organisation, grid_gco2e_per_kwh="2500")


def test_an_update_sets_clears_and_refuses(organisation: Organisation) -> None:
    profile = _create(organisation)
    onprem_profile_update(profile=profile, grid_gco2e_per_kwh="39.3")
    profile.refresh_from_db()
    assert profile.grid_gco2e_per_kwh == Decimal("39.3")
    edited = PriceAuditEvent.objects.filter(action="edited", subject_id=profile.pk).get()
    assert GRID_FIELD in edited.changes
    with pytest.raises(PricingError) as raised:
        onprem_profile_update(profile=profile, grid_gco2e_per_kwh=Decimal(2001))
    assert raised.value.field == GRID_FIELD
    profile.refresh_from_db()
    assert profile.grid_gco2e_per_kwh == Decimal("39.3")
    onprem_profile_update(profile=profile, grid_gco2e_per_kwh=None)
    profile.refresh_from_db()
    assert profile.grid_gco2e_per_kwh is None


def test_an_update_of_another_field_keeps_the_value(organisation: Organisation) -> None:
    profile = _create(organisation, grid_gco2e_per_kwh="323.1")
    onprem_profile_update(profile=profile, pue=Decimal("1.1"))
    profile.refresh_from_db()
    assert (profile.pue, profile.grid_gco2e_per_kwh) == (Decimal("1.1"), Decimal("323.1"))


# --- API ------------------------------------------------------------------------------------


def test_the_api_saves_and_shows_the_value(admin_api: APIClient) -> None:
    created = admin_api.post(API_URL, API_FIELDS | {"name": "DC", GRID_FIELD: "412.7"})
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body[GRID_FIELD] == "412.7"
    assert body["cost"]["price_per_gpu_hour"] == "2.6481"  # not a cost input
    assert OnPremProfile.objects.get(pk=body["id"]).grid_gco2e_per_kwh == Decimal("412.7")
    shown = admin_api.get(f"{API_URL}{body['id']}/").json()
    assert shown[GRID_FIELD] == "412.7"


def test_the_api_leaves_it_out_or_takes_null(admin_api: APIClient) -> None:
    left_out = admin_api.post(API_URL, API_FIELDS | {"name": "DC"})
    assert left_out.status_code == 201, left_out.json()
    assert left_out.json()[GRID_FIELD] is None
    null = admin_api.post(API_URL, API_FIELDS | {"name": "DC2", GRID_FIELD: None}, format="json")
    assert null.status_code == 201, null.json()
    assert null.json()[GRID_FIELD] is None


def test_the_api_patches_the_value(admin_api: APIClient) -> None:
    created = admin_api.post(API_URL, API_FIELDS | {"name": "DC"}).json()
    url = f"{API_URL}{created['id']}/"
    patched = admin_api.patch(url, {GRID_FIELD: "58.6"}, format="json")
    assert patched.status_code == 200, patched.json()
    assert patched.json()[GRID_FIELD] == "58.6"
    cleared = admin_api.patch(url, {GRID_FIELD: None}, format="json")
    assert cleared.status_code == 200, cleared.json()
    assert cleared.json()[GRID_FIELD] is None


@pytest.mark.parametrize("value", [*OUT_OF_RANGE, "lots", "412.75"])
def test_the_api_refuses_a_bad_value_with_a_400_naming_it(admin_api: APIClient, value: str) -> None:
    response = admin_api.post(API_URL, API_FIELDS | {"name": "DC", GRID_FIELD: value})
    assert response.status_code == 400
    assert GRID_FIELD in response.json()
    assert not OnPremProfile.objects.filter(name="DC").exists()


def test_an_api_patch_out_of_range_is_a_400_and_changes_nothing(admin_api: APIClient) -> None:
    created = admin_api.post(API_URL, API_FIELDS | {"name": "DC", GRID_FIELD: "100"}).json()
    response = admin_api.patch(f"{API_URL}{created['id']}/", {GRID_FIELD: "2001"}, format="json")
    assert response.status_code == 400
    assert response.json()[GRID_FIELD] == ["must be from 0 to 2000 gCO2e/kWh, got 2001.0"]
    profile = OnPremProfile.objects.get(pk=created["id"])
    assert profile.grid_gco2e_per_kwh == Decimal(100)


# --- The calculator's save form and the admin -----------------------------------------------


@pytest.fixture
def worked_example(db: None) -> OnPremProfile:
    pricing_demo_load()
    return OnPremProfile.objects.get(name=WORKED_EXAMPLE_NAME)


def _login(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _figures(profile: OnPremProfile, **changes: str) -> dict[str, str]:
    data = {name: str(getattr(profile, name)) for name in INPUT_FIELDS}
    data |= {
        "profile": str(profile.pk),
        "currency": profile.currency,
        "accelerator": str(profile.accelerator_id),
        "name": "Our H100 cluster on the Finnish grid",
        "source": "Finance",
    }
    return data | changes


def test_the_save_form_offers_the_field(worked_example: OnPremProfile, pricing_admin: User) -> None:
    html = _login(pricing_admin).get("/pricing/onprem/").content.decode()
    assert f'name="{GRID_FIELD}"' in html
    assert "Grid carbon intensity (gCO2e/kWh)" in html


@pytest.mark.parametrize(("value", "saved"), [("39.3", Decimal("39.3")), ("", None)])
def test_the_save_form_saves_it_or_leaves_it_empty(
    worked_example: OnPremProfile, pricing_admin: User, value: str, saved: Decimal | None
) -> None:
    data = _figures(worked_example, **{GRID_FIELD: value})
    response = _login(pricing_admin).post(SAVE_URL, data)
    assert response.status_code == 302
    assert OnPremProfile.objects.get(name=data["name"]).grid_gco2e_per_kwh == saved


@pytest.mark.parametrize("value", ["-1", "2000.1", "lots"])
def test_the_save_form_refuses_a_bad_value_naming_it(
    worked_example: OnPremProfile, pricing_admin: User, value: str
) -> None:
    data = _figures(worked_example, **{GRID_FIELD: value})
    response = _login(pricing_admin).post(SAVE_URL, data)
    assert response.status_code == 200
    assert list(response.context["save_form"].errors) == [GRID_FIELD]
    assert not OnPremProfile.objects.filter(name=data["name"]).exists()


def test_the_admin_form_refuses_out_of_range(
    worked_example: OnPremProfile, pricing_admin: User
) -> None:
    url = f"/admin/pricing/onpremprofile/{worked_example.pk}/change/"
    client = _login(pricing_admin)
    page = client.get(url)
    assert page.status_code == 200
    assert f'name="{GRID_FIELD}"' in page.content.decode()
    form = page.context["adminform"].form
    data = {
        name: ("" if value is None else str(value))
        for name, value in ((name, form[name].value()) for name in form.fields)
    }
    response = client.post(url, data | {GRID_FIELD: "2500"})
    assert response.status_code == 200
    assert GRID_FIELD in response.context["adminform"].form.errors
    response = client.post(url, data | {GRID_FIELD: "46.0"})
    assert response.status_code == 302, response.context["adminform"].form.errors
    worked_example.refresh_from_db()
    assert worked_example.grid_gco2e_per_kwh == Decimal("46.0")
