"""scripts/calibration_fit.py: the case files, the source-balanced loss, the spread, and the
generated fit the estimator runs on (no database)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pytest
from numpy.testing import assert_allclose

from estimator.core import calibration

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import calibration_fit as fitting  # noqa: E402

SHARED_CASES = ROOT.parent / "shared" / "calibration" / "cases.jsonl"

CASE_KEYS = {"id", "source", "hardware_row", "scenario", "measured", "measured_basis", "quality",
             "notes", "flags"}  # fmt: skip


def project_cases() -> list[dict]:
    cases = []
    for path in sorted(fitting.PROJECT_CASES.glob("*.jsonl")):
        cases += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return cases


def test_every_project_case_has_the_shared_format_and_a_traceable_source() -> None:
    cases = project_cases()
    assert len(cases) >= 100
    ids = [c["id"] for c in cases]
    assert len(ids) == len(set(ids))
    for case in cases:
        assert not CASE_KEYS - set(case), case["id"]
        assert case["measured"]["tokens_per_s_per_gpu"] > 0
        assert case["quality"] in ("direct", "derived", "secondary")
        assert len(case["source"]) > 20, case["id"]
        assert len(case["measured_basis"]) > 10, case["id"]


def test_every_project_case_is_scored_or_says_why_not() -> None:
    reasons = {c["id"]: fitting.unscored_reason(c) for c in project_cases()}
    unscored = {k: v for k, v in reasons.items() if v is not None}
    assert len(unscored) <= 3, unscored
    assert all(v for v in unscored.values())


def test_a_case_another_publication_contradicts_says_how() -> None:
    # The flag keeps it out of the fit and the scores; the report shows the evidence.
    flagged = [c for c in project_cases() if "contradicted_by_publication" in c["flags"]]
    assert flagged  # the ORNL Crusher log (2.2x its author's published figure)
    for case in flagged:
        assert fitting.unscored_reason(case) == "flag contradicted_by_publication"
        assert len(case.get("excluded_because", "")) > 40, case["id"]


def test_balanced_loss_weighs_each_source_the_same() -> None:
    # One source with 3 rows of error 0.3, another with 1 row of error 0.1: (0.3 + 0.1) / 2.
    loss = fitting.balanced_loss([0.3, -0.3, 0.3, 0.1], ["a", "a", "a", "b"])
    assert_allclose(loss, 0.2, rtol=1e-12)


def test_family_spread_band_holds_80_percent_of_lognormal_errors() -> None:
    rng = np.random.default_rng(0)
    errors = list(0.2 * rng.standard_normal(20000))
    sigma, bias = fitting.family_spread(errors)
    assert_allclose(sigma, 0.2, rtol=0.03)
    inside = np.mean(np.abs(errors) <= NormalDist().inv_cdf(0.9) * sigma)
    assert_allclose(inside, 0.80, atol=0.01)
    assert abs(bias) < 0.01
    assert fitting.family_spread([]) == (calibration.UNMEASURED_SIGMA, 0.0)
    assert fitting.family_spread([0.0, 0.001])[0] == fitting.MIN_SIGMA


def test_source_is_the_publication() -> None:
    assert fitting.source_of({"id": "narayanan21-t2-04"}) == "narayanan21"
    assert fitting.source_of({"id": "mlperf-v50-nvidia-gpt3"}) == "mlperf"


#: How close to a bound a fitted value may come before it counts as sitting at it: 1 %
#: of the bound, coarser than the fit's rounding (4 decimals) and its tolerance. [1]
AT_BOUND = 0.01


@pytest.mark.parametrize("family", sorted(calibration.FAMILY_FITS))
def test_the_shipped_fit_is_off_its_bounds_and_in_force(family: str) -> None:
    """Every fitted field lies strictly inside its bounds: below what the hardware allows
    (its cited limit) and above the fit's floor. A value at a bound means the model lacks
    something the runs do."""
    fit = calibration.FAMILY_FITS[family]
    efficiency = calibration.FAMILY_EFFICIENCY[family]
    for name, value in fit.fitted.items():
        low, high = fitting.bounds(family, name)
        limit = calibration.hardware_limit(family, name)
        assert high == limit.value
        assert limit.source
        assert low * (1 + AT_BOUND) < value < high * (1 - AT_BOUND), (name, value, limit)
        assert getattr(efficiency, name) == value
    assert set(efficiency.fitted) == set(fit.fitted)
    assert fit.sigma >= fitting.MIN_SIGMA
    assert calibration.family_sigma(family, "megatron-core") == fit.sigma
    assert fit.cases >= fit.sources >= 1


@pytest.mark.parametrize("stack", sorted(s for s in calibration.STACK_FACTORS if s != "pooled"))
def test_a_stacks_factor_is_off_the_searched_range(stack: str) -> None:
    offset = abs(math.log(calibration.STACK_FACTORS[stack]))
    assert offset < fitting.STACK_LOG_RANGE * (1 - AT_BOUND)


def test_no_stack_takes_a_kernel_fraction_past_the_hardware() -> None:
    for family in calibration.FAMILY_FITS:
        for stack in calibration.STACK_FACTORS:
            efficiency = calibration.efficiency_for(family, stack)
            for name in calibration.KERNEL_FIELDS:
                limit = calibration.hardware_limit(family, name).value
                assert getattr(efficiency, name) <= limit + 1e-12, (family, stack, name)


def test_an_unmeasured_family_keeps_its_prior_and_the_wide_spread() -> None:
    assert "aws-trainium" not in calibration.FAMILY_FITS
    assert calibration.FAMILY_EFFICIENCY["aws-trainium"] == calibration.PRIORS["aws-trainium"]
    named = calibration.calibrated_stacks()[0]
    assert calibration.family_sigma("aws-trainium", named) == calibration.UNMEASURED_SIGMA


def test_a_fit_recovers_the_efficiency_that_generated_the_measurements() -> None:
    """Cases whose 'measured' throughput is the model's own at gemm 0.6, attention 0.3:
    the fit finds those values back (to 2 %) from the prior's start."""
    cases = [c for c in project_cases() if c["id"].startswith("olmo")][:6]
    prepared = fitting.prepare(cases)
    prior = calibration.PRIORS["nvidia-hopper"]
    truth = calibration.with_fitted(prior, {"gemm": 0.6, "attention": 0.3, "fp8_gemm": 0.5})
    for case in prepared:
        case.measured = fitting.predict(case, truth)
    fitted = fitting.fit_family("nvidia-hopper", prepared)
    assert_allclose(fitted["gemm"], 0.6, rtol=0.02)
    assert_allclose(fitted["fp8_gemm"], 0.5, rtol=0.02)
    errors = [math.log(fitting.predict(c, calibration.with_fitted(prior, fitted)) / c.measured)
              for c in prepared]  # fmt: skip
    assert max(abs(e) for e in errors) < 0.01


def test_a_fit_that_wanders_past_a_bound_comes_back_to_the_optimum() -> None:
    """Nelder-Mead from a start far above the gemm bound sees a flat loss there (the bound
    clips the value) and stops; the restarts pull it back inside and find the efficiency
    that generated the measurements (gemm 0.78, attention 0.3)."""
    cases = [c for c in project_cases() if c["id"].startswith("olmo")][:6]
    prepared = [c for c in fitting.prepare(cases) if c.scenario.training.precision == "bf16"]
    prior = calibration.PRIORS["nvidia-hopper"]
    truth = calibration.with_fitted(prior, {"gemm": 0.78, "attention": 0.3})
    for case in prepared:
        case.measured = fitting.predict(case, truth)
    fitted = fitting.fit_family("nvidia-hopper", prepared, {"gemm": 3.0, "attention": 0.6})
    assert_allclose(fitted["gemm"], 0.78, rtol=0.02)
    assert_allclose(fitted["attention"], 0.3, rtol=0.05)


def test_a_family_measured_only_in_fp8_takes_the_reference_bf16_to_fp8_ratio() -> None:
    hopper = calibration.with_fitted(
        calibration.PRIORS["nvidia-hopper"], {"gemm": 0.7, "fp8_gemm": 0.6}
    )
    prior = calibration.PRIORS["nvidia-blackwell"]
    fp8_only = calibration.with_fitted(prior, {"fp8_gemm": 0.6, "attention": 0.3})
    table = calibration.with_bf16_from_fp8({"nvidia-hopper": hopper, "nvidia-blackwell": fp8_only})
    assert_allclose(table["nvidia-blackwell"].gemm, 0.6 * 0.7 / 0.6, rtol=1e-9)
    slow = calibration.with_fitted(prior, {"fp8_gemm": 0.3})
    kept = calibration.with_bf16_from_fp8({"nvidia-hopper": hopper, "nvidia-blackwell": slow})
    assert kept["nvidia-blackwell"].gemm == prior.gemm  # never below the prior
    assert kept["nvidia-hopper"] == hopper


def _two_family_cases() -> list[fitting.Prepared]:
    """Six OLMo cases (Hopper) and the project's Ampere cases of two sources (FlashAttention,
    fms-fsdp), their 'measurements' generated at known efficiencies so the fits have a
    definite optimum."""
    ampere = [p for p in fitting.prepare(project_cases()) if p.family == "nvidia-ampere"]
    sources = sorted({p.source for p in ampere})[:2]
    picked = [p for s in sources for p in [q for q in ampere if q.source == s][:3]]
    hopper = [c for c in project_cases() if c["id"].startswith("olmo")][:6]
    prepared = fitting.prepare(hopper) + picked
    truth = {
        "nvidia-hopper": {"gemm": 0.7, "attention": 0.3, "fp8_gemm": 0.6},
        "nvidia-ampere": {"gemm": 0.8, "attention": 0.35},
    }
    for case in prepared:
        prior = calibration.PRIORS[case.family]
        case.measured = fitting.predict(case, calibration.with_fitted(prior, truth[case.family]))
    return prepared


def test_families_fitted_in_parallel_equal_the_serial_fit() -> None:
    prepared = _two_family_cases()
    assert fitting.fit_all(prepared, processes=2) == fitting.fit_all(prepared)


def test_leaving_a_source_out_refits_only_the_families_it_measured_from_the_prior() -> None:
    prepared = _two_family_cases()
    whole = fitting.Fit(fitting.fit_all(prepared), {})
    ampere_sources = sorted({p.source for p in prepared if p.family == "nvidia-ampere"})
    left_out = ampere_sources[0]
    without = fitting.fit_without(lambda p: p.source == left_out, prepared, whole)
    # Hopper never saw the source: its fit is the whole one, untouched.
    assert without.families["nvidia-hopper"] == whole.families["nvidia-hopper"]
    # Ampere is refitted from its prior on the other source's cases alone.
    rest = [p for p in prepared if p.family == "nvidia-ampere" and p.source != left_out]
    assert without.families["nvidia-ampere"] == fitting.fit_family(
        "nvidia-ampere", rest, factors=without.factors
    )
    # A family whose only source is left out has no fit: it is predicted from its prior.
    only_hopper = {p.source for p in prepared if p.family == "nvidia-hopper"}
    assert len(only_hopper) == 1
    source = only_hopper.pop()
    alone = fitting.fit_without(lambda p: p.source == source, prepared, whole)
    assert "nvidia-hopper" not in alone.families


def _two_stack_cases(factors: dict[str, float]) -> list[fitting.Prepared]:
    """Hopper cases of two stacks (OLMo-core: PyTorch-native; the Megatron-MoE model zoo:
    Megatron-Core), 'measured' at gemm 0.6, attention 0.3 and each stack's factor."""
    picked = [c for c in project_cases() if c["id"].startswith(("olmo", "megatron-moe"))]
    prepared = [p for p in fitting.prepare(picked) if p.scenario.training.precision == "bf16"]
    assert {p.stack for p in prepared} == set(factors)
    truth = calibration.with_fitted(
        calibration.PRIORS["nvidia-hopper"], {"gemm": 0.6, "attention": 0.3}
    )
    for case in prepared:
        case.measured = fitting.predict(case, truth, factors[case.stack])
    return prepared


def test_a_stack_factor_is_recovered_and_shrunk_by_its_evidence() -> None:
    """With the family at the efficiency that generated the cases, each stack's own offset
    comes back; partial pooling keeps m / (m + 1) of it, m its sources (one each here)."""
    factors = {"pytorch-native": 0.9, "megatron-core": 1.2}
    prepared = _two_stack_cases(factors)
    found = fitting.fit_stacks(prepared, {"nvidia-hopper": {"gemm": 0.6, "attention": 0.3}})
    for stack, factor in factors.items():
        shrink = found[stack]["sources"] / (found[stack]["sources"] + 1)
        assert_allclose(math.log(found[stack]["factor"]), shrink * math.log(factor), atol=0.02)


def test_the_pooled_stack_is_the_median_of_the_current_stacks() -> None:
    stacks = {
        "megatron-core": {"factor": 1.2},
        "pytorch-native": {"factor": 0.9},
        "nanotron": {"factor": 1.0},
        "megatron-2021": {"factor": 3.0},  # a period stack: never what "auto" stands for
    }
    pooled = fitting.pooled_stack(stacks)
    assert pooled["factor"] == 1.0
    logs = [math.log(1.2), math.log(0.9), 0.0]
    assert_allclose(pooled["sigma"], math.sqrt(sum(x * x for x in logs) / 3), atol=1e-4)


def test_every_case_names_a_known_stack() -> None:
    for case in project_cases():
        assert fitting.stack_of(case) in fitting.STACKS


def test_weighted_quantile_weighs_each_value() -> None:
    assert fitting.weighted_quantile([3.0, 1.0, 2.0], [1.0, 1.0, 1.0], 0.5) == 2.0
    # One value carrying most of the weight is the quantile of most of the range.
    assert fitting.weighted_quantile([1.0, 2.0, 3.0], [0.1, 0.1, 5.0], 0.2) == 3.0
    assert fitting.weighted_quantile([1.0, 2.0, 3.0], [5.0, 0.1, 0.1], 0.8) == 1.0


def test_between_stack_spread_is_what_the_family_spread_leaves() -> None:
    # Two stacks, equal weight whatever their case counts: |e| of 0.1 (x 9) and 0.5 (x 1).
    # The weighted P80 of |e| is 0.5 (the second stack holds half the weight), so
    # S = 0.5 / Phi^-1(0.9) and tau = sqrt(S^2 - 0.1^2).
    errors = {"a": [(0.1, 0.1)] * 9, "b": [(-0.5, 0.1)]}
    spread = 0.5 / fitting.Z_80
    assert_allclose(fitting.between_stack_spread(errors), math.sqrt(spread**2 - 0.01), rtol=1e-12)
    # Left out, a stack's own errors do not widen the band it is scored against.
    assert_allclose(
        fitting.between_stack_spread(errors, leave_out="b"),
        math.sqrt(max(0.0, (0.1 / fitting.Z_80) ** 2 - 0.01)),
        rtol=1e-12,
    )
    assert fitting.between_stack_spread({}) == 0.0
    # Errors the families' own spread explains leave no between-stack spread.
    assert fitting.between_stack_spread({"a": [(0.01, 0.2)] * 5}) == 0.0


@pytest.mark.skipif(not SHARED_CASES.exists(), reason="needs ../shared/calibration")
def test_shipped_tau_is_the_spread_of_the_left_out_stacks() -> None:
    record = json.loads(calibration.FIT_PATH.read_text(encoding="utf-8"))
    sigmas = {k: float(v["sigma"]) for k, v in record["families"].items()}
    errors = fitting.stack_errors(fitting.load_cases(SHARED_CASES), record["out_of_stack"], sigmas)
    assert "megatron-2021" not in errors  # a period stack is not what "auto" stands for
    pooled = record["stacks"]["pooled"]
    assert_allclose(pooled["sigma"], fitting.between_stack_spread(errors), atol=1e-4)
    assert pooled["sigma"] == calibration.BETWEEN_STACK_SIGMA
    for stack, tau in pooled["sigma_without"].items():
        assert_allclose(tau, fitting.between_stack_spread(errors, leave_out=stack), atol=1e-4)
