"""The pricing pages: login required, reads for all, the CSV upload for pricing admins only."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from pricing import views
from pricing.demo import pricing_demo_load
from pricing.models import Accelerator, PriceBook, PriceEntry, Provider

pytestmark = pytest.mark.django_db

PAGES = [
    "/pricing/catalog/",
    "/pricing/catalog/H100-SXM/",
    "/pricing/books/",
    "/pricing/quotes/",
    "/pricing/onprem/",
]
ENTRIES_CSV = (
    "provider,region,accelerator,pricing_type,currency,price_per_accelerator_hour\n"
    "aws,us-east-1,H100-SXM,spot,USD,2.41\n"
    "aws,us-east-1,H999,spot,USD,2.41\n"
    "aws,us-east-1,B200,spot,USD,-1\n"
)


@pytest.fixture
def demo(db: None) -> None:
    pricing_demo_load()


def _login(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _upload(text: str, **fields: str) -> dict[str, object]:
    data: dict[str, object] = {
        "kind": "price-book",
        "name": "Uploaded",
        "currency": "USD",
        "source": "a vendor list",
        "fetched_at": "2026-03-01 00:00",
    }
    return data | fields | {"file": SimpleUploadedFile("prices.csv", text.encode())}


@pytest.mark.parametrize("url", [*PAGES, "/pricing/import/"])
def test_pricing_pages_need_login(url: str, client: Client) -> None:
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


@pytest.mark.parametrize("url", PAGES)
def test_pricing_pages_render_for_a_requester(url: str, demo: None, requester: User) -> None:
    response = _login(requester).get(url)
    assert response.status_code == 200
    assert b"Catalog" in response.content  # the nav link


def test_catalog_page_shows_specs_and_price_ranges(demo: None, requester: User) -> None:
    html = _login(requester).get("/pricing/catalog/").content.decode()
    assert "NVIDIA H100 SXM5 80GB" in html
    # From the public snapshot: Nebius spot $10.00 per 8-GPU node is the cheapest unflagged
    # H100 price, GCP a3-megagpu-8g on demand $92.2143 per node the dearest.
    unflagged = PriceEntry.objects.filter(accelerator__catalog_id="H100-SXM", data_flag="")
    prices = [entry.price_per_accelerator_hour for entry in unflagged]
    assert (min(prices), max(prices)) == (Decimal("1.25"), Decimal("92.2143") / 8)
    assert "1.25 \u2013 11.53" in html
    assert "flagged left out" in html


def test_catalog_page_compares_accelerators_side_by_side(demo: None, requester: User) -> None:
    response = _login(requester).get("/pricing/catalog/?compare=H100-SXM&compare=MI300X")
    comparison = response.context["comparison"]
    assert [a.catalog_id for a in response.context["compared"]] == ["MI300X", "H100-SXM"] or [
        a.catalog_id for a in response.context["compared"]
    ] == ["H100-SXM", "MI300X"]
    memory = next(row for row in comparison if row.label == "Memory")
    assert len(memory.cells) == 2
    assert "Side by side" in response.content.decode()


def test_price_book_page_shows_status_source_and_copy_for_admins(
    demo: None, requester: User, pricing_admin: User
) -> None:
    book = PriceBook.objects.get()
    html = _login(requester).get(f"/pricing/books/{book.pk}/").content.decode()
    assert "published" in html
    assert "public list-price snapshot" in html.lower()
    assert "Copy to new draft" not in html
    assert (
        "Copy to new draft"
        in _login(pricing_admin).get(f"/pricing/books/{book.pk}/").content.decode()
    )


def test_price_book_copy_page_action_is_for_pricing_admins(
    published_book: PriceBook, requester: User, pricing_admin: User
) -> None:
    url = f"/pricing/books/{published_book.pk}/copy/"
    assert _login(requester).post(url).status_code == 403
    response = _login(pricing_admin).post(url)
    copy = PriceBook.objects.get(copied_from=published_book)
    assert response["Location"] == f"/pricing/books/{copy.pk}/"
    assert copy.entries.count() == 2


def test_quote_list_flags_expired_quotes(demo: None, requester: User) -> None:
    html = _login(requester).get("/pricing/quotes/").content.decode()
    assert "EXAMPLE-0001" in html
    assert "badge good" in html


def test_csv_upload_is_forbidden_to_a_requester(requester: User) -> None:
    client = _login(requester)
    assert client.get("/pricing/import/").status_code == 403
    assert client.post("/pricing/import/", _upload(ENTRIES_CSV)).status_code == 403
    assert PriceBook.objects.count() == 0


def test_csv_upload_reports_every_problem_and_imports_nothing(
    demo: None, pricing_admin: User
) -> None:
    before = (PriceBook.objects.count(), PriceEntry.objects.count())
    response = _login(pricing_admin).post("/pricing/import/", _upload(ENTRIES_CSV))
    assert response.status_code == 200
    problems = [(p.line, p.column) for p in response.context["problems"]]
    assert problems == [(3, "accelerator"), (4, "price_per_accelerator_hour")]
    html = response.content.decode()
    assert "unknown SKU &#x27;H999&#x27;" in html
    assert "negative price -1" in html
    assert (PriceBook.objects.count(), PriceEntry.objects.count()) == before


def test_csv_upload_imports_a_good_file_into_a_new_draft(demo: None, pricing_admin: User) -> None:
    good = "\n".join(ENTRIES_CSV.splitlines()[:2]) + "\n"
    response = _login(pricing_admin).post("/pricing/import/", _upload(good))
    book = PriceBook.objects.get(name="Uploaded")
    assert response["Location"] == f"/pricing/books/{book.pk}/"
    assert (book.status, book.entries.count()) == (PriceBook.Status.DRAFT, 1)


def test_csv_upload_needs_a_book_or_a_new_book(pricing_admin: User) -> None:
    response = _login(pricing_admin).post("/pricing/import/", _upload(ENTRIES_CSV, name=""))
    assert response.status_code == 200
    assert response.context["form"].errors["name"] == ["Needed for a new draft book."]


def test_onprem_page_shows_the_worked_example(demo: None, requester: User) -> None:
    response = _login(requester).get("/pricing/onprem/")
    assert response.context["cost"]["price_per_gpu_hour"] == "2.6481"
    html = response.content.decode()
    assert "pricing/onprem.js" in html
    assert 'data-calculate-url="/api/v1/onprem-profiles/calculate/"' in html


# --- A big price book, and its copy --------------------------------------------------------


@pytest.fixture
def big_book(demo: None) -> PriceBook:
    """A draft of 250 entries: three pages of 100."""
    book = PriceBook.objects.create(
        name="Big", currency="USD", source="generated", fetched_at=timezone.now()
    )
    provider = Provider.objects.first()
    accelerator = Accelerator.objects.get(catalog_id="H100-SXM")
    PriceEntry.objects.bulk_create(
        PriceEntry(
            book=book,
            provider=provider,
            region=f"region-{index:03}",
            accelerator=accelerator,
            pricing_type="spot",
            price_per_accelerator_hour=Decimal("2.5"),
        )
        for index in range(250)
    )
    return book


def _rows(html: str) -> int:
    table = html.split('data-testid="entries"')[1].split("</table>")[0]
    return table.count("<tr") - 1  # less the header row


@pytest.mark.parametrize(
    ("page", "rows", "shown"),
    [
        ("", 100, "1 to 100"),
        ("2", 100, "101 to 200"),
        ("3", 50, "201 to 250"),
        ("99", 50, "201 to 250"),
        ("next", 100, "1 to 100"),
    ],
)
def test_price_book_page_shows_100_entries_a_page_with_links(
    big_book: PriceBook, requester: User, page: str, rows: int, shown: str
) -> None:
    url = f"/pricing/books/{big_book.pk}/" + (f"?page={page}" if page else "")
    html = _login(requester).get(url).content.decode()
    assert "Entries (250)" in html
    assert _rows(html) == rows
    assert f"Entries {shown} of 250" in html
    assert ('href="?page=3"' in html) == (rows == 100)  # "Last" until the last page


def test_price_book_page_size_does_not_grow_with_the_book(
    big_book: PriceBook, requester: User, django_assert_max_num_queries: Any
) -> None:
    client = _login(requester)
    with django_assert_max_num_queries(12):
        html = client.get(f"/pricing/books/{big_book.pk}/?page=2").content
    assert len(html) < 100_000


def test_price_book_page_has_no_page_links_for_a_small_book(demo: None, requester: User) -> None:
    book = PriceBook.objects.filter(entries__isnull=False).distinct().first()
    assert book is not None
    html = _login(requester).get(f"/pricing/books/{book.pk}/").content.decode()
    assert 'data-testid="entry-pages"' not in html


def test_price_book_copy_page_action_on_a_book_deleted_meanwhile(
    published_book: PriceBook, pricing_admin: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    stale = PriceBook.objects.get(pk=published_book.pk)
    monkeypatch.setattr(views, "get_object_or_404", lambda model, pk: stale)
    PriceBook.objects.filter(pk=published_book.pk).delete()
    client = _login(pricing_admin)
    response = client.post(f"/pricing/books/{published_book.pk}/copy/")
    assert response["Location"] == "/pricing/books/"
    assert not PriceBook.objects.exists()
    html = client.get("/pricing/books/").content.decode()
    assert "no longer exists" in html


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("name", "Q2\x00"),
        ("name", "n" * 201),
        ("currency", "US\x00"),
        ("source", "list\x00"),
        ("book", "1\x00"),
        ("kind", "quotes\x00"),
        ("fetched_at", "2026-03-01\x00"),
    ],
)
def test_csv_upload_text_the_database_cannot_store_is_a_form_error(
    demo: None, pricing_admin: User, field: str, value: str
) -> None:
    before = (PriceBook.objects.count(), PriceEntry.objects.count())
    response = _login(pricing_admin).post(
        "/pricing/import/", _upload(ENTRIES_CSV, **{field: value})
    )
    assert response.status_code == 200
    assert field in response.context["form"].errors
    assert (PriceBook.objects.count(), PriceEntry.objects.count()) == before


def test_csv_upload_with_a_nul_in_a_cell_lists_it_as_a_problem(
    demo: None, pricing_admin: User
) -> None:
    text = "provider,region,accelerator,pricing_type,currency,price_per_accelerator_hour\n"
    text += "aws,us-east\x00-1,H100-SXM,spot,USD,2.41\n"
    before = (PriceBook.objects.count(), PriceEntry.objects.count())
    response = _login(pricing_admin).post("/pricing/import/", _upload(text))
    assert response.status_code == 200
    problems = [(p.line, p.column, p.reason) for p in response.context["problems"]]
    assert problems == [(2, "region", "Null characters are not allowed.")]
    assert (PriceBook.objects.count(), PriceEntry.objects.count()) == before


def test_accelerator_page_of_an_id_with_a_nul_is_a_404(demo: None, requester: User) -> None:
    assert _login(requester).get("/pricing/catalog/H100%00/").status_code == 404
