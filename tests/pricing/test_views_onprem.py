"""Saving the on-prem calculator's figures as a profile: pricing admins only, the admin's rules."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.test import Client

from pricing.demo import WORKED_EXAMPLE_NAME, pricing_demo_load
from pricing.models import OnPremProfile
from pricing.tco import INPUT_FIELDS

pytestmark = pytest.mark.django_db

SAVE_URL = "/pricing/onprem/save/"


@pytest.fixture
def worked_example(db: None) -> OnPremProfile:
    pricing_demo_load()
    return OnPremProfile.objects.get(name=WORKED_EXAMPLE_NAME)


def _login(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _figures(profile: OnPremProfile, **changes: str) -> dict[str, str]:
    """What the page posts: the calculator's figures, the profile's currency and SKU."""
    data = {name: str(getattr(profile, name)) for name in INPUT_FIELDS}
    data |= {
        "profile": str(profile.pk),
        "currency": profile.currency,
        "accelerator": str(profile.accelerator_id),
        "name": "Our H100 cluster, 2027 power contract",
        "source": "Finance's 2027 electricity contract",
    }
    return data | changes


def _profile_count() -> int:
    return OnPremProfile.objects.count()


def test_the_save_form_is_offered_to_pricing_admins_only(
    worked_example: OnPremProfile, requester: User, pricing_admin: User
) -> None:
    html = _login(pricing_admin).get("/pricing/onprem/").content.decode()
    assert 'data-testid="onprem-save-button"' in html
    assert 'action="/pricing/onprem/save/"' in html
    assert f'name="server_price" value="{worked_example.server_price}"' in html
    html = _login(requester).get("/pricing/onprem/").content.decode()
    assert 'data-testid="onprem-save"' not in html
    assert "/pricing/onprem/save/" not in html


def test_a_pricing_admin_saves_the_calculators_figures(
    worked_example: OnPremProfile, pricing_admin: User
) -> None:
    data = _figures(worked_example, pue="1.1", electricity_price_per_kwh="0.095")
    client = _login(pricing_admin)
    response = client.post(SAVE_URL, data)
    saved = OnPremProfile.objects.get(name=data["name"])
    assert response.status_code == 302
    assert response["Location"] == f"/pricing/onprem/?profile={saved.pk}"
    assert (saved.pue, saved.electricity_price_per_kwh) == (Decimal("1.1"), Decimal("0.095"))
    for name in INPUT_FIELDS:
        assert Decimal(str(getattr(saved, name))) == Decimal(data[name]), name
    assert (saved.currency, saved.accelerator_id) == ("USD", worked_example.accelerator_id)
    assert saved.source == data["source"]
    assert saved.created_by == pricing_admin
    page = client.get(response["Location"])
    assert page.context["profile"] == saved
    assert "Saved the on-prem profile" in page.content.decode()


def test_a_duplicate_name_is_a_form_error_and_saves_nothing(
    worked_example: OnPremProfile, pricing_admin: User
) -> None:
    before = _profile_count()
    response = _login(pricing_admin).post(
        SAVE_URL, _figures(worked_example, name=WORKED_EXAMPLE_NAME)
    )
    assert response.status_code == 200
    assert "name" in response.context["save_form"].errors
    assert 'data-testid="save-errors"' in response.content.decode()
    assert _profile_count() == before


@pytest.mark.parametrize(
    ("field", "value", "label", "message"),
    [
        ("pue", "0.9", "PUE", "must be at least 1"),
        ("utilisation_percent", "0", "Expected utilisation", "must be above 0"),
        ("network_share_percent", "100", "Network share of cluster cost", "below 100"),
        ("server_price", "-5", "Server price", "must be positive"),
        ("pue", "1.2345", "PUE", "decimal places"),
        ("gpus_per_server", "eight", "GPUs per server", "whole number"),
        ("server_price", "", "Server price", "required"),
    ],
)
def test_an_invalid_figure_is_a_form_error_naming_it(
    worked_example: OnPremProfile,
    pricing_admin: User,
    field: str,
    value: str,
    label: str,
    message: str,
) -> None:
    before = _profile_count()
    response = _login(pricing_admin).post(SAVE_URL, _figures(worked_example, **{field: value}))
    assert response.status_code == 200
    errors = response.context["save_form"].errors
    assert list(errors) == [field]
    assert message in " ".join(errors[field])
    assert (label, errors[field]) in response.context["save_errors"]
    html = response.content.decode()
    assert f"<strong>{label}</strong>:" in html
    assert f'name="{field}" id="id_{field}" value="{value}"' in html  # the posted figure stays
    assert 'class="onprem stale"' in html
    assert _profile_count() == before


def test_only_pricing_admins_may_save_a_profile(
    worked_example: OnPremProfile, requester: User, client: Client
) -> None:
    before = _profile_count()
    assert _login(requester).post(SAVE_URL, _figures(worked_example)).status_code == 403
    response = client.post(SAVE_URL, _figures(worked_example))
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")
    assert _profile_count() == before


def test_the_save_page_takes_posts_only(worked_example: OnPremProfile, pricing_admin: User) -> None:
    assert _login(pricing_admin).get(SAVE_URL).status_code == 405


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("name", "Ours\x00", "Null characters are not allowed."),
        ("source", "Finance\x00", "Null characters are not allowed."),
        ("currency", "US\x00", "Null characters are not allowed."),
        ("accelerator", "1\x00", "Null characters are not allowed."),
        ("pue", "1.2\x00", "Enter a number."),
        ("name", "n" * 201, "Ensure this value has at most 200 characters (it has 201)."),
    ],
)
def test_text_the_database_cannot_store_is_a_form_error(
    worked_example: OnPremProfile, pricing_admin: User, field: str, value: str, reason: str
) -> None:
    response = _login(pricing_admin).post(SAVE_URL, _figures(worked_example, **{field: value}))
    assert response.status_code == 200
    assert response.context["save_form"].errors[field] == [reason]
    assert _profile_count() == 1
