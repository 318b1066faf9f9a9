"""The accelerator catalog the pricing app seeds from."""

from __future__ import annotations

import dataclasses

import pytest

from estimator.core import AcceleratorSpec, load_catalog

CONTRACT_IDS = (
    "V100-32GB-SXM", "A100-40GB-SXM", "A100-80GB-SXM", "A100-80GB-PCIE", "H100-SXM",
    "H100-PCIE", "H800-SXM", "H200-SXM", "B200", "MI250X", "MI300X", "TPU-v4", "TPU-v5e",
    "TPU-v5p", "Gaudi2", "Gaudi3", "L40S",
)  # fmt: skip
FIELDS = (
    "id", "name", "vendor", "memory_gib", "memory_bandwidth_tbs", "peak_tflops",
    "intra_node_interconnect", "intra_node_bandwidth_gbs", "inter_node_bandwidth_gbps",
    "devices_per_node", "tdp_w", "source", "notes", "family",
    # Set from a scenario's cluster.power_limit_w, not from the catalog (0 and {} there).
    "power_limit_w", "datasheet_peak_tflops",
)  # fmt: skip


def test_load_catalog_has_every_contract_id() -> None:
    assert set(CONTRACT_IDS) <= set(load_catalog())


def test_accelerator_spec_fields_are_the_agreed_ones() -> None:
    assert tuple(f.name for f in dataclasses.fields(AcceleratorSpec)) == FIELDS
    with pytest.raises(dataclasses.FrozenInstanceError):
        load_catalog()["H100-SXM"].memory_gib = 1  # type: ignore[misc]


@pytest.mark.parametrize("spec", load_catalog().values(), ids=lambda s: s.id)
def test_load_catalog_rows_are_complete(spec: AcceleratorSpec) -> None:
    assert spec.source
    assert spec.notes
    assert spec.name
    assert spec.vendor
    assert spec.family
    assert spec.memory_gib > 0
    assert spec.memory_bandwidth_tbs > 0
    assert spec.intra_node_bandwidth_gbs > 0
    assert spec.inter_node_bandwidth_gbps > 0
    assert spec.devices_per_node >= 1
    assert spec.tdp_w >= 0
    assert set(spec.peak_tflops) <= {"fp32", "tf32", "fp16", "bf16", "fp8"}
    assert spec.peak_tflops
    assert all(v > 0 for v in spec.peak_tflops.values())
    assert "bf16" in spec.peak_tflops or "fp16" in spec.peak_tflops


def test_load_catalog_h100_matches_reference_datasheet() -> None:
    h100 = load_catalog()["H100-SXM"]
    assert h100.peak_tflops["bf16"] == 989.4
    assert h100.peak_tflops["fp8"] == 1978.9
    assert h100.memory_gib == 80
    assert h100.intra_node_bandwidth_gbs == 450
    assert "fp8" not in load_catalog()["A100-80GB-SXM"].peak_tflops


def test_load_catalog_specs_have_no_power_limit() -> None:
    for spec in load_catalog().values():
        assert spec.power_limit_w == 0.0
        assert spec.datasheet_peak_tflops == {}
        assert spec.datasheet() is spec
