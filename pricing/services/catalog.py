"""Accelerators and providers: the catalog sync, custom SKUs, provider records."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

from estimator.core.catalog import AcceleratorSpec, load_catalog
from lib.actors import OptionalActor, actor_user
from lib.updates import model_update
from pricing.errors import DuplicateRecord, PricingError
from pricing.models import PRECISIONS, Accelerator, Provider
from pricing.services._common import positive_check

CATALOG_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
SPEC_FIELDS = (
    "name",
    "vendor",
    "family",
    "memory_gib",
    "memory_bandwidth_tbs",
    *(f"peak_tflops_{precision}" for precision in PRECISIONS),
    "intra_node_interconnect",
    "intra_node_bandwidth_gbs",
    "inter_node_bandwidth_gbps",
    "devices_per_node",
    "tdp_w",
    "source",
    "notes",
)


@dataclass
class CatalogSyncResult:
    """What a catalog sync did, by catalog id."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    skipped_custom: list[str] = field(default_factory=list)
    not_in_catalog: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        lines = [
            f"Accelerator catalog: {len(self.created)} created, {len(self.updated)} updated, "
            f"{len(self.unchanged)} unchanged."
        ]
        if self.skipped_custom:
            lines.append(f"  custom SKUs kept as they are: {', '.join(self.skipped_custom)}")
        if self.not_in_catalog:
            lines.append(f"  no longer in the catalog (kept): {', '.join(self.not_in_catalog)}")
        return lines


def _spec_fields(spec: AcceleratorSpec) -> dict[str, Any]:
    values: dict[str, Any] = {
        name: getattr(spec, name) for name in SPEC_FIELDS if not name.startswith("peak_")
    }
    for precision in PRECISIONS:
        values[f"peak_tflops_{precision}"] = spec.peak_tflops.get(precision)
    return values


@transaction.atomic
def accelerator_catalog_sync(
    *, catalog: Mapping[str, AcceleratorSpec] | None = None
) -> CatalogSyncResult:
    """Create or update one Accelerator per catalog SKU; never touch a custom SKU.

    ``catalog`` defaults to the estimator's :func:`~estimator.core.catalog.load_catalog`, the
    one source of truth for accelerator specifications.
    """
    specs = load_catalog() if catalog is None else catalog
    existing = {row.catalog_id: row for row in Accelerator.objects.select_for_update()}
    result = CatalogSyncResult()
    now = timezone.now()
    for catalog_id, spec in specs.items():
        values = _spec_fields(spec)
        current = existing.get(catalog_id)
        if current is None:
            Accelerator.objects.create(catalog_id=catalog_id, synced_at=now, **values)
            result.created.append(catalog_id)
        elif current.is_custom:
            result.skipped_custom.append(catalog_id)
        elif model_update(current, values, allowed=SPEC_FIELDS, refuse=PricingError):
            result.updated.append(catalog_id)
        else:
            result.unchanged.append(catalog_id)
    result.not_in_catalog = sorted(
        catalog_id
        for catalog_id, row in existing.items()
        if not row.is_custom and catalog_id not in specs
    )
    Accelerator.objects.filter(catalog_id__in=specs, is_custom=False).update(synced_at=now)
    return result


def accelerator_specs_check(values: Mapping[str, Any]) -> None:
    """Refuse figures no accelerator has (non-positive memory, negative power, ...)."""
    for name in ("memory_gib", "memory_bandwidth_tbs"):
        if name in values:
            positive_check(values[name], field=name, what=name.replace("_", " "))
    for name in ("intra_node_bandwidth_gbs", "inter_node_bandwidth_gbps", "tdp_w"):
        if values.get(name) is not None and values[name] < 0:
            raise PricingError(f"must not be negative, got {values[name]}", field=name)
    for precision in PRECISIONS:
        peak = values.get(f"peak_tflops_{precision}")
        if peak is not None and peak <= 0:
            raise PricingError(
                f"must be positive or left empty, got {peak}", field=f"peak_tflops_{precision}"
            )


def accelerator_custom_create(
    *, user: OptionalActor, catalog_id: str, name: str, vendor: str, **specs: Any
) -> Accelerator:
    """Add a SKU the estimator's catalog lacks, flagged custom so no sync overwrites it."""
    accelerator_custom_id_check(catalog_id)
    accelerator_specs_check(specs)
    return Accelerator.objects.create(
        catalog_id=catalog_id,
        name=name,
        vendor=vendor,
        is_custom=True,
        created_by=actor_user(user),
        **specs,
    )


def accelerator_custom_id_check(catalog_id: str) -> None:
    """Refuse an id that is malformed, taken, or reserved by the estimator's catalog."""
    if not CATALOG_ID_PATTERN.match(catalog_id):
        raise PricingError(
            "use letters, digits, '.', '_' or '-' (at most 64), starting with a letter or digit",
            field="catalog_id",
        )
    if catalog_id in load_catalog():
        raise DuplicateRecord(
            f"{catalog_id!r} is a catalog SKU; it comes from the estimator's catalog",
            field="catalog_id",
        )
    if Accelerator.objects.filter(catalog_id=catalog_id).exists():
        raise DuplicateRecord(f"an accelerator {catalog_id!r} exists", field="catalog_id")


def accelerator_custom_update(*, accelerator: Accelerator, **changes: Any) -> Accelerator:
    """Change the specs of a custom SKU; catalog SKUs change only through the catalog."""
    if not accelerator.is_custom:
        raise PricingError(
            f"{accelerator.catalog_id} comes from the estimator's catalog and changes only "
            "there (then run `manage.py sync_catalog`)",
            field="catalog_id",
        )
    accelerator_specs_check(changes)
    accelerator = Accelerator.objects.get(pk=accelerator.pk)  # the stored row (see below)
    model_update(accelerator, changes, allowed=SPEC_FIELDS, refuse=PricingError)
    return accelerator


def provider_create(
    *, slug: str, name: str, kind: str, website: str = "", notes: str = ""
) -> Provider:
    if kind not in Provider.Kind.values:
        raise PricingError(f"unknown kind {kind!r}", field="kind")
    if Provider.objects.filter(slug=slug).exists():
        raise DuplicateRecord(f"a provider {slug!r} exists", field="slug")
    if Provider.objects.filter(name__iexact=name).exists():
        raise DuplicateRecord(f"a provider named {name!r} exists", field="name")
    return Provider.objects.create(slug=slug, name=name, kind=kind, website=website, notes=notes)


def provider_update(*, provider: Provider, **changes: Any) -> Provider:
    if "kind" in changes and changes["kind"] not in Provider.Kind.values:
        raise PricingError(f"unknown kind {changes['kind']!r}", field="kind")
    others = Provider.objects.exclude(pk=provider.pk)
    if "slug" in changes and others.filter(slug=changes["slug"]).exists():
        raise DuplicateRecord(f"a provider {changes['slug']!r} exists", field="slug")
    if "name" in changes and others.filter(name__iexact=changes["name"]).exists():
        raise DuplicateRecord(f"a provider named {changes['name']!r} exists", field="name")
    # The stored row, not the caller's instance: an admin form has already set its new
    # values on that one, and model_update would find nothing to save.
    provider = Provider.objects.get(pk=provider.pk)
    model_update(
        provider, changes, allowed=("slug", "name", "kind", "website", "notes"), refuse=PricingError
    )
    return provider
