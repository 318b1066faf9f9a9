"""The demo organisation, which the pricing demo's quote and on-prem profile belong to and
whose members the demo users are."""

from __future__ import annotations

from organisations.models import Organisation
from organisations.services import organisation_create

DEMO_ORGANISATION = "Acme AI Research"


def demo_organisation() -> Organisation:
    """The demo organisation, created when missing (idempotent)."""
    found = Organisation.objects.filter(name=DEMO_ORGANISATION).first()
    return found or organisation_create(name=DEMO_ORGANISATION, base_currency="USD")
