"""The scenario schema: one definition of each key's default, bounds and help, which the
validator and the typed scenario read."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from estimator.core import ScenarioError, schema, validate_scenario, wholerun
from estimator.core.montecarlo import Uncertainty
from estimator.core.scenario import Margins, MethodConfig, ParallelismConfig, RunSettings

from .scenarios import SMALL, scenario
from .schema_probes import expected_refusal, probe_cases, spec_with, validator_refusal


@pytest.mark.parametrize(("path", "value"), list(probe_cases()))
def test_the_validator_refuses_exactly_what_the_schema_bounds_refuse(
    path: str, value: float
) -> None:
    assert validator_refusal(path, value) == expected_refusal(path, value)


def test_every_bounded_key_is_probed_on_both_sides() -> None:
    cases = list(probe_cases())
    for key in schema.bounded_keys():
        outcomes = {
            expected_refusal(path, value) is None for path, value in cases if path == key.path
        }
        assert outcomes == {True, False}, key.path
    assert ("margins.network_jitter", 10.0) in cases


def test_network_jitter_has_one_default_and_one_range() -> None:
    jitter = schema.key("margins.network_jitter")
    assert (jitter.default, jitter.minimum, jitter.maximum) == (0.05, 0.0, 10.0)
    assert Margins().network_jitter == jitter.default
    validated = validate_scenario(SMALL).margins
    assert validated == Margins(**schema.defaults("margins"))
    # The Monte Carlo's accepted ranges are the margins' own.
    Uncertainty(network_jitter=(0.0, 10.0))
    with pytest.raises(ScenarioError):
        Uncertainty(network_jitter=(0.0, np.nextafter(10.0, 11.0)))


def test_the_typed_scenario_takes_its_defaults_from_the_schema() -> None:
    checked = []
    for cls, section in (
        (Margins, "margins"),
        (RunSettings, "run"),
        (MethodConfig, "training.method"),
        (ParallelismConfig, "parallelism"),
    ):
        for field in dataclasses.fields(cls):
            path = f"{section}.{field.name}"
            if field.name not in schema.names(section) or field.default is None:
                continue  # None: the whole-run model fills the schema's default in
            known = schema.key(path)
            if known.default is not None and not known.required:
                checked.append(path)
                assert field.default == known.default, path
    assert "margins.network_jitter" in checked
    assert "training.method.rank" in checked
    assert schema.default("run.evaluation_fraction") == wholerun.EVALUATION_FRACTION


def test_each_section_allows_the_schema_keys_and_names_them_when_refusing() -> None:
    with pytest.raises(ScenarioError) as error:
        validate_scenario(scenario(SMALL, margins={"x": 1}))
    assert error.value.key == "margins.x"
    assert error.value.reason == (
        "unknown key, expected one of ('framework_overhead', 'network_jitter')"
    )
    assert schema.names("parallelism") == (
        "tp", "pp", "dp", "cp", "ep", "micro_batch_size", "zero_stage", "recompute",
        "sequence_parallel", "pipeline_schedule", "virtual_stages", "activation_offload",
    )  # fmt: skip
    assert schema.names("training.method") == (
        "type", "rank", "targets", "dropout", "frozen_layers", "frozen_embeddings",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("path", "value", "reason"),
    [
        ("model.num_layers", -3, "must be a positive integer, got -3"),
        ("model.moe.num_shared_experts", -1, "must be an integer >= 0, got -1"),
        ("cluster.num_gpus", 10**9, "must be at most 1,000,000, got 1000000000"),
        ("parallelism.zero_stage", 4, "must be 0, 1, 2 or 3, got 4"),
        ("margins.network_jitter", 11, "must be a number in [0, 10], got 11"),
        ("margins.network_jitter", "high", "must be a number in [0, 10], got 'high'"),
        ("training.optimizer", "adam", "must be one of ('adamw', 'adamw8bit', 'adafactor', "
         "'sgd', 'lion'), got 'adam'"),
    ],
)  # fmt: skip
def test_a_refusal_names_the_key_and_the_bound(path: str, value: object, reason: str) -> None:
    with pytest.raises(ScenarioError) as info:
        validate_scenario(spec_with(path, value))
    assert (info.value.key, info.value.reason) == (path, reason)


def test_an_exclusive_bound_refuses_the_bound_itself() -> None:
    share = schema.Key(
        "run.share", "number", "a share above 0", minimum=0.0, maximum=1.0,
        exclusive_minimum=True,
    )  # fmt: skip
    assert share.interval == "(0, 1]"
    assert share.parse(1.0) == 1.0
    with pytest.raises(ScenarioError, match=r"run.share: must be a number in \(0, 1\], got 0"):
        share.parse(0)
    with pytest.raises(ValueError, match="inclusive minimum"):
        schema.Key("x.n", "integer", "n", minimum=0, exclusive_minimum=True)


def test_help_text_carries_the_default() -> None:
    assert schema.key("margins.network_jitter").help_text.endswith("(default 0.05)")
    assert schema.key("training.optimizer").help_text.endswith('(default "adamw")')
    assert "margins.network_jitter: number in [0, 10], default 0.05" in schema.summary()
    with pytest.raises(LookupError):
        schema.default("model.num_layers")
