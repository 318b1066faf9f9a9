"""estimator.calibration.record: the Monte Carlo's spread for families without measurements
comes from the fit's prior-only predictions, and the estimator runs on it."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest

from estimator.calibration.loading import load_cases
from estimator.calibration.record import (
    load_fit,
    prior_only_errors,
    unmeasured_sigma_problem,
    unmeasured_spread,
)
from estimator.calibration.spread import Z_80
from estimator.core import calibration
from estimator.core.montecarlo import Uncertainty
from estimator.core.scenario import Margins

from .sample_cases import SHARED_CASES


def shipped_record() -> dict[str, Any]:
    return load_fit()


def test_the_estimator_runs_on_the_spread_the_fit_measured() -> None:
    record = shipped_record()
    assert unmeasured_sigma_problem(record) is None
    assert record["unmeasured"]["sigma"] == calibration.UNMEASURED_SIGMA
    # ... and so does the Monte Carlo, for a family nobody measured.
    named = calibration.calibrated_stacks()[0]  # a stated stack: no between-stack spread
    resolved = Uncertainty().resolved(Margins(), "aws-trainium", named)
    assert resolved.efficiency_sigma == record["unmeasured"]["sigma"]


@pytest.mark.skipif(not SHARED_CASES.exists(), reason="needs ../shared/calibration")
def test_the_stored_spread_is_the_measurement_of_the_stored_predictions() -> None:
    record = shipped_record()
    cases = load_cases(SHARED_CASES)
    measured = unmeasured_spread(cases, record["out_of_sample"])
    assert measured == record["unmeasured"]
    single = [f for f, entry in record["families"].items() if entry["sources"] == 1]
    assert measured["families"] == sorted(single)


def test_a_spread_that_differs_from_the_estimators_fails_the_report() -> None:
    record = copy.deepcopy(shipped_record())
    record["unmeasured"]["sigma"] = calibration.UNMEASURED_SIGMA + 0.05
    problem = unmeasured_sigma_problem(record)
    assert problem is not None
    assert "UNMEASURED_SIGMA" in problem
    del record["unmeasured"]
    assert "make accuracy" in (unmeasured_sigma_problem(record) or "")


def synthetic_case(case_id: str, source: str, accelerator: str, measured: float) -> dict:
    """A scored case of the given accelerator (its family comes from the catalog)."""
    return {
        "id": case_id,
        "source_group": source,
        "measured": {"tokens_per_s_per_gpu": measured},
        "scenario": {
            "format_version": 1,
            "model": {"name": "t", "num_layers": 4, "hidden_size": 1024,
                      "num_attention_heads": 8, "vocab_size": 32000, "seq_len": 2048},
            "training": {"tokens": 1e9, "global_batch_size": 64, "precision": "bf16"},
            "cluster": {"accelerator": accelerator, "num_gpus": 8},
            "parallelism": "auto",
        },
    }  # fmt: skip


def test_only_families_with_a_single_source_count_as_prior_only() -> None:
    cases = [
        synthetic_case("a1", "one", "MI250X", 100.0),  # amd-cdna2: a single source
        synthetic_case("a2", "one", "MI250X", 100.0),
        synthetic_case("h1", "x", "H100-SXM", 100.0),  # nvidia-hopper: two sources
        synthetic_case("h2", "y", "H100-SXM", 100.0),
    ]
    predicted = {"a1": 150.0, "a2": 80.0, "h1": 300.0, "h2": 10.0}
    families, errors = prior_only_errors(cases, predicted)
    assert families == ["amd-cdna2"]
    assert errors == pytest.approx([math.log(1.5), math.log(0.8)], rel=1e-12)


def test_unmeasured_spread_is_kept_to_the_step() -> None:
    # Errors of +-0.3846 give P80 |e| / 1.2816 = 0.3001: stored as 0.3.
    cases = [synthetic_case(f"a{i}", "one", "MI250X", 100.0) for i in range(4)]
    error = 0.3 * Z_80 + 1e-4
    predicted = {f"a{i}": 100.0 * math.exp(error * (-1) ** i) for i in range(4)}
    entry = unmeasured_spread(cases, predicted)
    assert entry["sigma"] == 0.3
    assert entry["measured"] == pytest.approx(0.3001, abs=1e-4)
    assert entry["cases"] == 4


def test_unmeasured_spread_needs_a_prior_only_prediction() -> None:
    cases = [
        synthetic_case("h1", "x", "H100-SXM", 100.0),
        synthetic_case("h2", "y", "H100-SXM", 90.0),
    ]
    with pytest.raises(ValueError, match="single source"):
        unmeasured_spread(cases, {"h1": 100.0, "h2": 100.0})
