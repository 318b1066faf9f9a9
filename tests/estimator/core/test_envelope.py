"""The planner's export as the command line's input."""

from __future__ import annotations

import copy

import pytest

from estimator.core import ScenarioError, estimate
from estimator.core.envelope import scenario_of

from .scenarios import SMALL


def _export(scenario: dict[str, object]) -> dict[str, object]:
    return {
        "format": "trainplan-scenario",
        "version": 1,
        "name": "Small",
        "scenario": scenario,
        "price_source": "price_entry",
        "price_id": 7,
    }


def test_scenario_of_a_bare_scenario_is_itself() -> None:
    assert scenario_of(SMALL) is SMALL


def test_scenario_of_an_export_is_its_scenario_and_estimates_the_same() -> None:
    assert scenario_of(_export(SMALL)) == SMALL
    assert estimate(scenario_of(_export(SMALL)))["step_time_s"] == estimate(SMALL)["step_time_s"]


def test_an_exported_scenario_without_format_version_gets_its_exports() -> None:
    bare = copy.deepcopy(SMALL)
    del bare["format_version"]
    assert scenario_of(_export(bare))["format_version"] == 1


@pytest.mark.parametrize(
    ("change", "key", "reason"),
    [
        ({"format": "something-else"}, "format", "must be 'trainplan-scenario'"),
        ({"version": 2}, "version", "must be 1 for a trainplan-scenario document, got 2"),
        ({"scenario": None}, "scenario", "must be the exported scenario"),
    ],
)
def test_a_document_that_is_not_our_export_names_the_key(
    change: dict[str, object], key: str, reason: str
) -> None:
    with pytest.raises(ScenarioError) as refused:
        scenario_of(_export(SMALL) | change)
    assert refused.value.key == key
    assert reason in refused.value.reason
