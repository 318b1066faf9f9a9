"""Give every existing quote, on-prem profile and draft price book an organisation.

A quote or profile goes to the organisation whose scenarios use it (the one of its oldest
scenario), else to the demo organisation, else to the first organisation (one named
"Default organisation" is created when there is none). Published books stay public: they are
the list prices everyone could pick until now (the demo's snapshot among them); a draft goes
to an organisation its author is pricing admin of, else as above.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations

DEMO_ORGANISATION = "Acme AI Research"
FALLBACK_ORGANISATION = ("Default organisation", "default-organisation")
PRICING_ADMIN = "pricing_admin"


class _Fallback:
    """The organisation of records no scenario uses, looked up (or created) once."""

    def __init__(self, apps: Any) -> None:
        self.model = apps.get_model("planner", "Organisation")
        self.pk: int | None = None

    def __call__(self) -> int:
        if self.pk is None:
            found = (
                self.model.objects.filter(name=DEMO_ORGANISATION).first()
                or self.model.objects.order_by("pk").first()
            )
            if found is None:
                name, slug = FALLBACK_ORGANISATION
                found = self.model.objects.create(name=name, slug=slug)
            self.pk = found.pk
        return self.pk


def _user_organisation(scenarios: Any, field: str, pk: int) -> int | None:
    used = scenarios.filter(**{field: pk}).order_by("pk")
    found: int | None = used.values_list("project__organisation_id", flat=True).first()
    return found


def _assign(model: Any, field: str, scenarios: Any, fallback: _Fallback) -> None:
    for record in model.objects.filter(organisation__isnull=True).only("pk"):
        organisation = _user_organisation(scenarios, field, record.pk) or fallback()
        model.objects.filter(pk=record.pk).update(organisation_id=organisation)


def _draft_books_assign(apps: Any, fallback: _Fallback) -> None:
    books = apps.get_model("pricing", "PriceBook").objects
    memberships = apps.get_model("planner", "Membership").objects
    for book in books.filter(organisation__isnull=True, status="draft"):
        author = memberships.filter(user_id=book.created_by_id, role=PRICING_ADMIN)
        organisation = author.order_by("pk").values_list("organisation_id", flat=True).first()
        books.filter(pk=book.pk).update(organisation_id=organisation or fallback())


def organisations_assign(apps: Any, schema_editor: Any) -> None:
    scenarios = apps.get_model("planner", "Scenario").objects
    fallback = _Fallback(apps)
    _assign(apps.get_model("pricing", "VendorQuote"), "vendor_quote", scenarios, fallback)
    _assign(apps.get_model("pricing", "OnPremProfile"), "onprem_profile", scenarios, fallback)
    _draft_books_assign(apps, fallback)


class Migration(migrations.Migration):
    dependencies = [
        ("pricing", "0002_organisation_fields"),
    ]

    operations = [
        migrations.RunPython(organisations_assign, migrations.RunPython.noop, elidable=False),
    ]
