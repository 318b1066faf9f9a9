"""The audit trail of price changes: who changed which price, when, before and after.

Every service that creates, edits, publishes, copies or deletes a price book, a price entry,
a vendor quote or an on-prem profile calls :func:`price_audit_record` in its transaction, so
the row is written exactly when the change is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lib.actors import OptionalActor, actor_user
from lib.updates import Change, audit_diff, audit_value
from pricing.access import record_organisation_id
from pricing.models import OnPremProfile, PriceAuditEvent, PriceBook, PriceEntry, VendorQuote

Subject = PriceBook | PriceEntry | VendorQuote | OnPremProfile

SUBJECTS: dict[type, str] = {
    PriceBook: PriceAuditEvent.Subject.PRICE_BOOK,
    PriceEntry: PriceAuditEvent.Subject.PRICE_ENTRY,
    VendorQuote: PriceAuditEvent.Subject.VENDOR_QUOTE,
    OnPremProfile: PriceAuditEvent.Subject.ONPREM_PROFILE,
}


def price_audit_label(subject: Subject) -> str:
    """How the trail names ``subject``: ``Price book 'March list'``, ``Vendor quote ...``."""
    kind = PriceAuditEvent.Subject(SUBJECTS[type(subject)]).label
    return f"{kind} '{subject}'"[:300]


def price_audit_fields(subject: Subject, fields: tuple[str, ...]) -> dict[str, list[Any]]:
    """``{field: [None, value]}``: a record's values as its creation's diff."""
    return {name: [None, audit_value(getattr(subject, name))] for name in fields}


def price_audit_record(
    *,
    actor: OptionalActor,
    action: str,
    subject: Subject,
    changes: Mapping[str, Change] | dict[str, list[Any]] | None = None,
    comment: str = "",
) -> PriceAuditEvent:
    """Append one event; ``changes`` as ``model_update`` returns them or already as
    ``{field: [before, after]}``."""
    diff: dict[str, list[Any]]
    if changes and all(isinstance(value, Change) for value in changes.values()):
        diff = audit_diff(changes)  # type: ignore[arg-type]
    else:
        diff = dict(changes or {})  # type: ignore[arg-type]
    return PriceAuditEvent.objects.create(
        organisation_id=record_organisation_id(subject),
        actor=actor_user(actor),
        action=action,
        subject_type=SUBJECTS[type(subject)],
        subject_id=subject.pk,
        subject_label=price_audit_label(subject),
        changes=diff,
        comment=comment,
    )
