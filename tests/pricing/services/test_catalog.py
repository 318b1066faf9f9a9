from __future__ import annotations

import dataclasses

import pytest

from estimator.core.catalog import load_catalog
from pricing.errors import DuplicateRecord, PricingError
from pricing.models import Accelerator
from pricing.services import (
    accelerator_catalog_sync,
    accelerator_custom_create,
    accelerator_custom_update,
)

pytestmark = pytest.mark.django_db


def _custom(catalog_id: str = "ACME-X1") -> Accelerator:
    return accelerator_custom_create(
        user=None,
        catalog_id=catalog_id,
        name="Acme X1",
        vendor="Acme",
        memory_gib=96.0,
        memory_bandwidth_tbs=3.0,
        peak_tflops_bf16=800.0,
        tdp_w=600.0,
    )


def test_accelerator_catalog_sync_creates_every_catalog_sku_with_its_specs() -> None:
    catalog = load_catalog()
    result = accelerator_catalog_sync()
    assert sorted(result.created) == sorted(catalog)
    stored = {a.catalog_id: a for a in Accelerator.objects.all()}
    assert set(stored) == set(catalog)
    for catalog_id, spec in catalog.items():
        row = stored[catalog_id]
        assert (row.name, row.memory_gib, row.tdp_w) == (spec.name, spec.memory_gib, spec.tdp_w)
        assert row.peak_tflops == spec.peak_tflops
        assert row.source == spec.source
        assert not row.is_custom


def test_accelerator_catalog_sync_is_idempotent_and_repairs_edits() -> None:
    accelerator_catalog_sync()
    Accelerator.objects.filter(catalog_id="H100-SXM").update(memory_gib=1.0)
    result = accelerator_catalog_sync()
    assert result.updated == ["H100-SXM"]
    assert result.created == []
    assert Accelerator.objects.get(catalog_id="H100-SXM").memory_gib == 80.0


def test_accelerator_catalog_sync_never_overwrites_a_custom_sku() -> None:
    custom = _custom()
    spec = dataclasses.replace(load_catalog()["H100-SXM"], id="ACME-X1", name="Overwritten")
    result = accelerator_catalog_sync(catalog={"ACME-X1": spec})
    assert result.skipped_custom == ["ACME-X1"]
    stored = Accelerator.objects.get(catalog_id="ACME-X1")
    assert (stored.name, stored.memory_gib, stored.is_custom) == ("Acme X1", 96.0, True)
    assert stored.updated_at == custom.updated_at
    accelerator_catalog_sync()
    assert Accelerator.objects.get(catalog_id="ACME-X1").name == "Acme X1"


def test_accelerator_custom_create_refuses_a_catalog_id() -> None:
    with pytest.raises(DuplicateRecord, match="catalog SKU"):
        _custom("H100-SXM")


def test_accelerator_custom_create_refuses_non_positive_memory() -> None:
    with pytest.raises(PricingError) as refused:
        accelerator_custom_create(
            user=None,
            catalog_id="BAD-1",
            name="Bad",
            vendor="Acme",
            memory_gib=0.0,
            memory_bandwidth_tbs=1.0,
        )
    assert refused.value.field == "memory_gib"


def test_accelerator_custom_update_refuses_catalog_skus() -> None:
    accelerator_catalog_sync()
    with pytest.raises(PricingError, match="estimator's catalog"):
        accelerator_custom_update(
            accelerator=Accelerator.objects.get(catalog_id="H100-SXM"), memory_gib=1.0
        )
    custom = accelerator_custom_update(accelerator=_custom(), memory_gib=128.0)
    assert custom.memory_gib == 128.0
