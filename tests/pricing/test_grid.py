"""Grid carbon intensity of cloud regions: the data file and its loader."""

from __future__ import annotations

import csv
from decimal import Decimal
from pathlib import Path

import pytest

from pricing.grid import COLUMNS, GRID_INTENSITY_CSV, GridIntensity, grid_intensity
from pricing.grid import grid_intensity_table as table

DATA = Path(GRID_INTENSITY_CSV).parent


def _rows() -> list[dict[str, str]]:
    with GRID_INTENSITY_CSV.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_the_file_loads_every_row_once() -> None:
    rows = _rows()
    assert rows
    assert tuple(rows[0]) == COLUMNS
    assert len(table()) == len(rows)
    assert all(isinstance(value, GridIntensity) for value in table().values())


def test_every_row_has_a_source_a_year_and_a_plausible_value() -> None:
    for intensity in table().values():
        where = (intensity.provider_slug, intensity.region)
        assert Decimal(0) <= intensity.gco2e_per_kwh <= Decimal(1200), where
        assert 2019 <= intensity.year <= 2030, where
        assert intensity.source.startswith("Google Cloud, 'Carbon free energy"), where
        assert "https://" in intensity.source, where


def test_every_provider_is_one_the_demo_creates() -> None:
    with (DATA / "providers.csv").open(newline="", encoding="utf-8") as handle:
        slugs = {row["slug"] for row in csv.DictReader(handle)}
    assert {intensity.provider_slug for intensity in table().values()} <= slugs


def test_the_demo_books_hyperscaler_regions_are_covered() -> None:
    with (DATA / "public_list_prices_snapshot.csv").open(newline="", encoding="utf-8") as handle:
        regions = {
            (row["provider"], row["region"])
            for row in csv.DictReader(handle)
            if row["provider"] in ("aws", "gcp", "azure")
        }
    assert regions
    assert [region for region in sorted(regions) if grid_intensity(*region) is None] == []


@pytest.mark.parametrize(
    ("provider", "region", "value"),
    [
        ("gcp", "us-central1", "412.72"),
        ("gcp", "us-east4", "323.05"),
        ("aws", "us-east-1", "323.05"),
        ("aws", "us-west-2", "79.23"),
        ("azure", "eastus", "323.05"),
        ("nebius", "eu-north1", "39.32"),
    ],
)
def test_a_known_region_gives_its_value(provider: str, region: str, value: str) -> None:
    intensity = grid_intensity(provider, region)
    assert intensity is not None
    assert intensity.gco2e_per_kwh == Decimal(value)
    assert intensity.year == 2024
    assert (intensity.provider_slug, intensity.region) == (provider, region)


def test_a_proxy_says_which_location_it_stands_for() -> None:
    intensity = grid_intensity("aws", "us-east-1")
    assert intensity is not None
    assert "row us-east4 (Northern Virginia)" in intensity.source
    assert "proxy for AWS US East (N. Virginia)" in intensity.source


def test_case_and_spaces_are_ignored() -> None:
    assert grid_intensity(" AWS ", "US-East-1") == grid_intensity("aws", "us-east-1")


@pytest.mark.parametrize(
    ("provider", "region"),
    [("aws", "mars-north-1"), ("oci", "global"), ("spheron", "marketplace"), ("", "")],
)
def test_an_unknown_region_gives_none(provider: str, region: str) -> None:
    assert grid_intensity(provider, region) is None


def test_the_file_is_read_once() -> None:
    assert table() is table()
