"""The audit trail of price changes: who changed which price, when, before and after."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from lib.appendonly import AppendOnlyRefused
from organisations.models import Organisation, Role
from organisations.services import membership_grant, organisation_create
from pricing.demo import pricing_demo_load
from pricing.models import OnPremProfile, PriceAuditEvent, PriceBook, VendorQuote
from pricing.services import (
    onprem_profile_update,
    price_book_copy,
    price_book_publish,
    quote_delete,
    quote_update,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def organisation() -> Organisation:
    return organisation_create(name="Acme AI Research")


@pytest.fixture
def admin(organisation: Organisation) -> User:
    user = User.objects.create_user("ivan", password="ivan-pass")
    membership_grant(organisation=organisation, user=user, role=Role.PRICING_ADMIN)
    return user


def _events(**filters: object) -> list[tuple[str, str, dict[str, object]]]:
    return [
        (event.action, event.subject_label, event.changes)
        for event in PriceAuditEvent.objects.filter(**filters).order_by("pk")
    ]


def test_a_quote_created_edited_and_deleted_leaves_who_when_before_and_after(
    organisation: Organisation, admin: User
) -> None:
    pricing_demo_load()
    api = APIClient()
    api.force_authenticate(admin)
    quote = VendorQuote.objects.get(organisation=organisation)
    before = quote.price_per_accelerator_hour
    response = api.patch(
        f"/api/v1/quotes/{quote.pk}/", {"price_per_accelerator_hour": "1.99"}, format="json"
    )
    assert response.status_code == 200, response.json()
    edited = PriceAuditEvent.objects.filter(subject_id=quote.pk, action="edited").get()
    assert edited.actor == admin
    assert edited.organisation == organisation
    assert edited.subject_type == PriceAuditEvent.Subject.VENDOR_QUOTE
    assert edited.changes["price_per_accelerator_hour"] == [str(before), "1.9900000000"]
    quote_delete(quote=VendorQuote.objects.get(pk=quote.pk), user=admin)
    deleted = PriceAuditEvent.objects.get(subject_id=quote.pk, action="deleted")
    assert deleted.changes["vendor"] == [None, quote.vendor]  # the history outlives the quote
    assert not VendorQuote.objects.filter(pk=quote.pk).exists()


def test_an_edit_that_changes_nothing_writes_nothing(
    organisation: Organisation, admin: User
) -> None:
    pricing_demo_load()
    quote = VendorQuote.objects.get(organisation=organisation)
    count = PriceAuditEvent.objects.count()
    quote_update(quote=quote, user=admin, vendor=quote.vendor)
    assert PriceAuditEvent.objects.count() == count


def test_creating_publishing_and_copying_a_book_are_audited(
    organisation: Organisation, admin: User
) -> None:
    pricing_demo_load()
    public = PriceBook.objects.get(organisation=None)
    copy = price_book_copy(book=public, user=admin, organisation=organisation)
    assert [action for action, _label, _changes in _events(subject_id=copy.pk)] == [
        "created",
        "copied",
    ]
    copied = PriceAuditEvent.objects.get(subject_id=copy.pk, action="copied")
    assert copied.changes == {"copied_from": [None, f"PriceBook {public.pk}"]}
    assert f"{public.entries.count()} entries copied" in copied.comment
    price_book_publish(book=copy, user=admin)
    published = PriceAuditEvent.objects.get(subject_id=copy.pk, action="published")
    assert published.changes == {"status": ["draft", "published"]}
    assert published.actor == admin


def test_an_on_prem_profile_edit_keeps_the_figure_before_and_after(
    organisation: Organisation, admin: User
) -> None:
    pricing_demo_load()
    profile = OnPremProfile.objects.get(organisation=organisation)
    old = profile.server_price
    onprem_profile_update(profile=profile, user=admin, server_price=old + Decimal(1000))
    edited = PriceAuditEvent.objects.get(subject_id=profile.pk, action="edited")
    assert edited.changes == {"server_price": [str(old), str(old + Decimal(1000))]}


def test_the_trail_is_append_only(organisation: Organisation, admin: User) -> None:
    pricing_demo_load()
    event = PriceAuditEvent.objects.first()
    assert event is not None
    event.comment = "rewritten"
    with pytest.raises(AppendOnlyRefused):
        event.save()
    with pytest.raises(AppendOnlyRefused):
        event.delete()
    with pytest.raises(AppendOnlyRefused):
        PriceAuditEvent.objects.all().update(comment="rewritten")
    with pytest.raises(AppendOnlyRefused):
        PriceAuditEvent.objects.all().delete()
