"""Grid carbon intensity of cloud regions [gCO2e/kWh], from ``data/grid_intensity.csv``.

Location-based annual averages: the carbon the local grid emits per kWh it supplies, not a
provider's market-based figure after its renewable purchases. Google Cloud publishes one
per region (GoogleCloudPlatform/region-carbon-info); a region of another provider takes
that dataset's figure for the matching location, and its ``source`` says so. A region that
could not be sourced is not in the file, and :func:`grid_intensity` gives None for it.

Pure apart from reading the file once (the table is cached for the process).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from pathlib import Path

GRID_INTENSITY_CSV = Path(__file__).resolve().parent / "data" / "grid_intensity.csv"
COLUMNS = ("provider_slug", "region", "gco2e_per_kwh", "year", "source")


@dataclass(frozen=True)
class GridIntensity:
    """The annual average carbon intensity of a region's grid.

    ``gco2e_per_kwh`` [gCO2e/kWh] is for calendar year ``year``; ``source`` names where it
    comes from (a URL, the row, and for a proxy which location it stands for).
    """

    provider_slug: str
    region: str
    gco2e_per_kwh: Decimal
    year: int
    source: str


def _key(provider_slug: str, region: str) -> tuple[str, str]:
    return provider_slug.strip().lower(), region.strip().lower()


@cache
def grid_intensity_table() -> dict[tuple[str, str], GridIntensity]:
    """Every row of the file, keyed by (provider slug, region), both lower-cased."""
    table: dict[tuple[str, str], GridIntensity] = {}
    with GRID_INTENSITY_CSV.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise ValueError(f"{GRID_INTENSITY_CSV.name}: columns must be {', '.join(COLUMNS)}")
        for line, row in enumerate(reader, start=2):
            key = _key(row["provider_slug"], row["region"])
            if key in table:
                raise ValueError(f"{GRID_INTENSITY_CSV.name} line {line}: {key} repeated")
            table[key] = GridIntensity(
                provider_slug=key[0],
                region=row["region"].strip(),
                gco2e_per_kwh=Decimal(row["gco2e_per_kwh"]),
                year=int(row["year"]),
                source=row["source"].strip(),
            )
    return table


def grid_intensity(provider_slug: str, region: str) -> GridIntensity | None:
    """The grid carbon intensity of ``region`` of the provider ``provider_slug``.

    Case and surrounding spaces are ignored (``"AWS"``, ``" us-east-1"``); None when the
    file has no figure for that region.
    """
    return grid_intensity_table().get(_key(provider_slug, region))
