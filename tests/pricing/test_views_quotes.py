"""Quote entry in the app: pricing admins create, edit and expire quotes with the rules the
API and the CSV import apply; a refused value shows on its field; others may not."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from pricing.models import Accelerator, PriceAuditEvent, VendorQuote
from pricing.services.csv_import import QUOTE_COLUMNS, QUOTE_CSV_COLUMNS
from tests.pricing.test_views import _login

pytestmark = pytest.mark.django_db


def _form(catalog: dict[str, Accelerator], **changes: Any) -> dict[str, Any]:
    return {
        "vendor": "Acme Compute",
        "reference": "Q-2026-17",
        "accelerator": catalog["H100-SXM"].pk,
        "accelerator_count": "128",
        "total_price": "1121280.00",
        "term_months": "6",
        "currency": "USD",
        "valid_from": "2026-01-01",
        "valid_until": "2099-12-31",
        "terms": "six months, billed monthly",
    } | changes


def test_a_pricing_admin_enters_a_quote_for_a_term(
    pricing_admin: User, catalog: dict[str, Accelerator]
) -> None:
    client = _login(pricing_admin)
    page = client.get(reverse("pricing:quote-create"))
    assert page.status_code == 200
    response = client.post(reverse("pricing:quote-create"), _form(catalog))
    assert response.status_code == 302
    quote = VendorQuote.objects.get()
    # 1,121,280 / (128 x 6 months x 730 h) = 2.00 per accelerator-hour, derived by the service
    assert quote.price_per_accelerator_hour == Decimal("2.0000000000")
    assert quote.price_basis == VendorQuote.PriceBasis.TERM_TOTAL
    assert (quote.total_price, quote.term_months) == (Decimal("1121280.00"), 6)
    assert quote.organisation.name == pricing_admin.memberships.get().organisation.name
    assert PriceAuditEvent.objects.filter(subject_id=quote.pk, action="created").exists()
    listing = client.get(reverse("pricing:quote-list")).content.decode()
    assert "1,121,280 USD" in listing
    assert "2.00 USD/GPU-h" in listing


@pytest.mark.parametrize(
    ("changes", "field", "reason"),
    [
        ({"term_months": ""}, "term_months", "term"),  # a total needs its term
        ({"term_months": "601"}, "term_months", "between 1 and 600"),
        ({"valid_until": "2025-12-31"}, "valid_until", "before valid_from"),
        ({"currency": "usd"}, "currency", "unknown currency"),
        ({"total_price": "", "price_per_accelerator_hour": ""}, "price_per_accelerator_hour", ""),
        ({"price_per_accelerator_hour": "3.00"}, "price_per_accelerator_hour", "disagrees"),
        ({"accelerator_count": "0"}, "accelerator_count", ""),
    ],
)
def test_bad_input_is_shown_on_its_field_and_nothing_is_saved(
    pricing_admin: User,
    catalog: dict[str, Accelerator],
    changes: dict[str, str],
    field: str,
    reason: str,
) -> None:
    response = _login(pricing_admin).post(
        reverse("pricing:quote-create"), _form(catalog, **changes)
    )
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert field in errors, errors
    assert reason in " ".join(errors[field])
    assert f'data-field="{field}"' in response.content.decode()
    assert not VendorQuote.objects.exists()


def test_editing_the_total_derives_the_price_again(
    pricing_admin: User, term_quote: VendorQuote
) -> None:
    client = _login(pricing_admin)
    url = reverse("pricing:quote-edit", args=[term_quote.pk])
    page = client.get(url).content.decode()
    assert 'value="4709376.00"' in page
    form = client.get(url).context["form"]
    data = {name: form[name].value() for name in form.fields} | {"total_price": "2242560.00"}
    data = {name: "" if value is None else value for name, value in data.items()}
    data.pop("is_example")  # an unchecked box is not posted
    response = client.post(url, data)
    assert response.status_code == 302, response.context["form"].errors
    term_quote.refresh_from_db()
    # 2,242,560 / (256 x 12 x 730 h) = 1.00 per accelerator-hour
    assert term_quote.price_per_accelerator_hour == Decimal("1.0000000000")
    assert term_quote.total_price == Decimal("2242560.00")


def test_expiring_a_quote_ends_its_validity_yesterday(
    pricing_admin: User, term_quote: VendorQuote
) -> None:
    response = _login(pricing_admin).post(reverse("pricing:quote-expire", args=[term_quote.pk]))
    assert response.status_code == 302
    term_quote.refresh_from_db()
    today = timezone.localdate()
    assert term_quote.valid_until == today - timedelta(days=1)
    assert term_quote.validity_on(today) == "expired"
    assert PriceAuditEvent.objects.filter(subject_id=term_quote.pk, action="edited").exists()


def test_a_requester_may_not_enter_edit_or_expire_quotes(
    requester: User, term_quote: VendorQuote, catalog: dict[str, Accelerator]
) -> None:
    client = _login(requester)
    assert client.get(reverse("pricing:quote-create")).status_code == 403
    assert client.post(reverse("pricing:quote-create"), _form(catalog)).status_code == 403
    assert client.get(reverse("pricing:quote-edit", args=[term_quote.pk])).status_code == 403
    assert client.post(reverse("pricing:quote-expire", args=[term_quote.pk])).status_code == 403
    listing = client.get(reverse("pricing:quote-list")).content.decode()
    assert 'data-testid="quote-new"' not in listing
    assert VendorQuote.objects.count() == 1
    term_quote.refresh_from_db()
    assert term_quote.valid_until == date(2099, 12, 31)


def test_another_organisations_admin_cannot_see_or_change_the_quote(
    other_pricing_admin: User, term_quote: VendorQuote
) -> None:
    client = _login(other_pricing_admin)
    assert client.get(reverse("pricing:quote-edit", args=[term_quote.pk])).status_code == 404
    assert client.post(reverse("pricing:quote-expire", args=[term_quote.pk])).status_code == 404


def test_the_entry_page_documents_every_csv_column(pricing_admin: User) -> None:
    assert [name for name, _required, _meaning in QUOTE_CSV_COLUMNS] == list(QUOTE_COLUMNS)
    page = _login(pricing_admin).get(reverse("pricing:quote-create")).content.decode()
    for name, _required, _meaning in QUOTE_CSV_COLUMNS:
        assert f"<code>{name}</code>" in page
    assert reverse("pricing:csv-upload") in page
