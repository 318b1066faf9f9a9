"""The accelerator catalog: specifications with sources, read from ``estimator/data``.

The pricing app seeds its database from :func:`load_catalog`; the field names of
:class:`AcceleratorSpec` are part of that contract.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from estimator.core.errors import ScenarioError

CATALOG_PATH = Path(__file__).resolve().parent.parent / "data" / "accelerators.csv"
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8")


@dataclass(frozen=True)
class AcceleratorSpec:
    """One accelerator as the estimator sees it (all figures per device, dense).

    Attributes
    ----------
    memory_gib : float
        Device memory. [GiB]
    memory_bandwidth_tbs : float
        Peak memory bandwidth. [TB/s]
    peak_tflops : dict of str to float
        Dense peak per precision ('fp32', 'tf32', 'fp16', 'bf16', 'fp8'); a precision the
        chip lacks is absent. [TFLOP/s]
    intra_node_bandwidth_gbs : float
        Fast-domain link bandwidth per device, one direction. [GB/s]
    inter_node_bandwidth_gbps : float
        Scale-out network bandwidth per device. [Gbit/s]
    tdp_w : float
        Board power (0 when unknown). [W]
    family : str
        Efficiency family the fitted calibration parameters are looked up by.
    power_limit_w : float
        Power limit the board runs at (``cluster.power_limit_w``); 0 for the TDP, no
        limit. With a limit, ``peak_tflops`` are the sustained peaks under it
        (:func:`estimator.core.power.spec_at_power_limit`). [W]
    datasheet_peak_tflops : dict of str to float
        The datasheet peaks when a power limit scaled ``peak_tflops``; empty otherwise
        (:meth:`datasheet`). [TFLOP/s]
    """

    id: str
    name: str
    vendor: str
    memory_gib: float
    memory_bandwidth_tbs: float
    peak_tflops: dict[str, float]
    intra_node_interconnect: str
    intra_node_bandwidth_gbs: float
    inter_node_bandwidth_gbps: float
    devices_per_node: int
    tdp_w: float
    source: str
    notes: str
    family: str = "generic"
    power_limit_w: float = 0.0
    datasheet_peak_tflops: dict[str, float] = field(default_factory=dict)

    def datasheet(self) -> AcceleratorSpec:
        """This accelerator at its TDP: the datasheet peaks, the yardstick of MFU.

        Returns
        -------
        AcceleratorSpec
            ``self`` without a power limit; with one, a copy with the datasheet
            ``peak_tflops`` [TFLOP/s] back and ``power_limit_w`` 0.
        """
        if not self.power_limit_w:
            return self
        return dataclasses.replace(
            self,
            peak_tflops=dict(self.datasheet_peak_tflops),
            power_limit_w=0.0,
            datasheet_peak_tflops={},
        )


def _float(text: str) -> float:
    return float(text) if text.strip() else 0.0


def _spec_from_row(row: dict[str, str]) -> AcceleratorSpec:
    peaks = {p: float(row[f"peak_tflops_{p}"]) for p in PRECISIONS if row[f"peak_tflops_{p}"]}
    return AcceleratorSpec(
        id=row["id"],
        name=row["name"],
        vendor=row["vendor"],
        memory_gib=float(row["memory_gib"]),
        memory_bandwidth_tbs=float(row["memory_bandwidth_tbs"]),
        peak_tflops=peaks,
        intra_node_interconnect=row["intra_node_interconnect"],
        intra_node_bandwidth_gbs=_float(row["intra_node_bandwidth_gbs"]),
        inter_node_bandwidth_gbps=_float(row["inter_node_bandwidth_gbps"]),
        devices_per_node=int(row["devices_per_node"]),
        tdp_w=_float(row["tdp_w"]),
        source=row["source"],
        notes=row["notes"],
        family=row["family"],
    )


@functools.cache
def _load(path: str) -> tuple[AcceleratorSpec, ...]:
    with open(path, encoding="utf-8", newline="") as handle:
        return tuple(_spec_from_row(row) for row in csv.DictReader(handle))


def load_catalog(path: str | Path | None = None) -> dict[str, AcceleratorSpec]:
    """Read the accelerator catalog.

    Parameters
    ----------
    path : str or Path, optional
        CSV file; default ``estimator/data/accelerators.csv``.

    Returns
    -------
    dict of str to AcceleratorSpec
        Keyed by catalog id, in file order.
    """
    return dict(_by_id(str(path or CATALOG_PATH)))


@functools.cache
def _by_id(path: str) -> dict[str, AcceleratorSpec]:
    """The catalog keyed by id, built once per file (callers get copies of it)."""
    return {spec.id: spec for spec in _load(path)}


def catalog_spec(accelerator_id: str) -> AcceleratorSpec | None:
    """The default catalog's accelerator ``accelerator_id``, None when it has none."""
    return _by_id(str(CATALOG_PATH)).get(accelerator_id)


SPEC_OVERRIDE_KEYS = {
    "name": str,
    "vendor": str,
    "family": str,
    "memory_gib": float,
    "memory_bandwidth_tbs": float,
    "peak_tflops": dict,
    "intra_node_interconnect": str,
    "intra_node_bandwidth_gbs": float,
    "inter_node_bandwidth_gbps": float,
    "devices_per_node": int,
    "tdp_w": float,
}


def _checked_override(key: str, value: Any, kind: type) -> Any:
    where = f"cluster.accelerator_spec.{key}"
    if kind is str:
        if not isinstance(value, str):
            raise ScenarioError(where, f"must be a string, got {value!r}")
        return value
    if kind is dict:
        return _checked_peaks(where, value)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ScenarioError(where, f"must be a finite number, got {value!r}")
    if value <= 0 and key != "tdp_w":
        raise ScenarioError(where, f"must be positive, got {value!r}")
    if kind is int and value != int(value):
        raise ScenarioError(where, f"must be an integer, got {value!r}")
    return kind(value)


def _checked_peaks(where: str, value: Any) -> dict[str, float]:
    if not isinstance(value, dict):
        raise ScenarioError(where, f"must be an object of precision to TFLOP/s, got {value!r}")
    peaks: dict[str, float] = {}
    for precision, tflops in value.items():
        if precision not in PRECISIONS:
            raise ScenarioError(f"{where}.{precision}", f"unknown precision, use {PRECISIONS}")
        bad = isinstance(tflops, bool) or not isinstance(tflops, int | float)
        if bad or not math.isfinite(tflops) or tflops <= 0:
            raise ScenarioError(
                f"{where}.{precision}", f"must be a positive number, got {tflops!r}"
            )
        peaks[precision] = float(tflops)
    return peaks


def spec_with_overrides(spec: AcceleratorSpec, overrides: Mapping[str, Any]) -> AcceleratorSpec:
    """Return ``spec`` with the fields of a scenario's ``cluster.accelerator_spec`` replaced.

    ``peak_tflops`` entries are merged per precision, so one figure can be corrected alone.

    Parameters
    ----------
    spec : AcceleratorSpec
        The catalog's accelerator.
    overrides : mapping
        Fields of :data:`SPEC_OVERRIDE_KEYS` in the units of :class:`AcceleratorSpec`
        (memory [GiB], bandwidths [TB/s], [GB/s], [Gbit/s], peaks [TFLOP/s], power [W]).

    Returns
    -------
    AcceleratorSpec
        A copy with the given fields replaced.

    Raises
    ------
    ScenarioError
        An unknown field, or a value of the wrong type or out of range.
    """
    changes: dict[str, Any] = {}
    for key, value in overrides.items():
        if key not in SPEC_OVERRIDE_KEYS:
            known = ", ".join(sorted(SPEC_OVERRIDE_KEYS))
            raise ScenarioError(f"cluster.accelerator_spec.{key}", f"unknown field, use {known}")
        changes[key] = _checked_override(key, value, SPEC_OVERRIDE_KEYS[key])
    if not changes:  # the spec is frozen: nothing to replace, nothing to copy
        return spec
    if "peak_tflops" in changes:
        changes["peak_tflops"] = {**spec.peak_tflops, **changes["peak_tflops"]}
    return dataclasses.replace(spec, **changes)


REQUIRED_FOR_NEW_CHIP = (
    "memory_gib",
    "memory_bandwidth_tbs",
    "peak_tflops",
    "intra_node_bandwidth_gbs",
    "inter_node_bandwidth_gbps",
)


def custom_spec(accelerator_id: str, overrides: Mapping[str, Any]) -> AcceleratorSpec:
    """Build a spec for a chip the catalog lacks, entirely from ``cluster.accelerator_spec``.

    The figures in :data:`REQUIRED_FOR_NEW_CHIP` must be given; the efficiency family is
    ``generic`` (conservative defaults) unless ``family`` names a known one.

    Parameters
    ----------
    accelerator_id : str
        The scenario's ``cluster.accelerator``, used as id and name.
    overrides : mapping
        ``cluster.accelerator_spec``, in the units of :class:`AcceleratorSpec`.

    Returns
    -------
    AcceleratorSpec
        The new chip; 8 devices per node unless ``devices_per_node`` is given.

    Raises
    ------
    ScenarioError
        A required figure is missing or a value is invalid.
    """
    for key in REQUIRED_FOR_NEW_CHIP:
        if key not in overrides:
            raise ScenarioError(
                f"cluster.accelerator_spec.{key}",
                f"required because {accelerator_id!r} is not in the catalog",
            )
    blank = AcceleratorSpec(
        id=accelerator_id,
        name=accelerator_id,
        vendor="unknown",
        memory_gib=1.0,
        memory_bandwidth_tbs=1.0,
        peak_tflops={},
        intra_node_interconnect="unknown",
        intra_node_bandwidth_gbs=1.0,
        inter_node_bandwidth_gbps=1.0,
        devices_per_node=8,
        tdp_w=0.0,
        source="cluster.accelerator_spec in the scenario",
        notes="user-supplied specification",
        family="generic",
    )
    return spec_with_overrides(blank, overrides)
