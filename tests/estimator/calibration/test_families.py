"""estimator.calibration.families: the source-balanced loss, and the family fits against
efficiencies that generated the measurements and against the shipped fit (no database)."""

from __future__ import annotations

import math

import pytest
from numpy.testing import assert_allclose

from estimator.calibration.families import balanced_loss, bounds, fit_all, fit_family, predict
from estimator.calibration.loading import prepare
from estimator.calibration.spread import MIN_SIGMA
from estimator.core import calibration

from .sample_cases import AT_BOUND, project_cases, two_family_cases


def test_balanced_loss_weighs_each_source_the_same() -> None:
    # One source with 3 rows of error 0.3, another with 1 row of error 0.1: (0.3 + 0.1) / 2.
    loss = balanced_loss([0.3, -0.3, 0.3, 0.1], ["a", "a", "a", "b"])
    assert_allclose(loss, 0.2, rtol=1e-12)


@pytest.mark.parametrize("family", sorted(calibration.FAMILY_FITS))
def test_the_shipped_fit_is_off_its_bounds_and_in_force(family: str) -> None:
    """Every fitted field lies strictly inside its bounds: below what the hardware allows
    (its cited limit) and above the fit's floor. A value at a bound means the model lacks
    something the runs do."""
    fit = calibration.FAMILY_FITS[family]
    efficiency = calibration.FAMILY_EFFICIENCY[family]
    for name, value in fit.fitted.items():
        low, high = bounds(family, name)
        limit = calibration.hardware_limit(family, name)
        assert high == limit.value
        assert limit.source
        assert low * (1 + AT_BOUND) < value < high * (1 - AT_BOUND), (name, value, limit)
        assert getattr(efficiency, name) == value
    assert set(efficiency.fitted) == set(fit.fitted)
    assert fit.sigma >= MIN_SIGMA
    assert calibration.family_sigma(family, "megatron-core") == fit.sigma
    assert fit.cases >= fit.sources >= 1


def test_an_unmeasured_family_keeps_its_prior_and_the_wide_spread() -> None:
    assert "aws-trainium" not in calibration.FAMILY_FITS
    assert calibration.FAMILY_EFFICIENCY["aws-trainium"] == calibration.PRIORS["aws-trainium"]
    named = calibration.calibrated_stacks()[0]
    assert calibration.family_sigma("aws-trainium", named) == calibration.UNMEASURED_SIGMA


def test_a_fit_recovers_the_efficiency_that_generated_the_measurements() -> None:
    """Cases whose 'measured' throughput is the model's own at gemm 0.6, attention 0.3:
    the fit finds those values back (to 2 %) from the prior's start."""
    cases = [c for c in project_cases() if c["id"].startswith("olmo")][:6]
    prepared = prepare(cases)
    prior = calibration.PRIORS["nvidia-hopper"]
    truth = calibration.with_fitted(prior, {"gemm": 0.6, "attention": 0.3, "fp8_gemm": 0.5})
    for case in prepared:
        case.measured = predict(case, truth)
    fitted = fit_family("nvidia-hopper", prepared)
    assert_allclose(fitted["gemm"], 0.6, rtol=0.02)
    assert_allclose(fitted["fp8_gemm"], 0.5, rtol=0.02)
    errors = [math.log(predict(c, calibration.with_fitted(prior, fitted)) / c.measured)
              for c in prepared]  # fmt: skip
    assert max(abs(e) for e in errors) < 0.01


def test_a_fit_that_wanders_past_a_bound_comes_back_to_the_optimum() -> None:
    """Nelder-Mead from a start far above the gemm bound sees a flat loss there (the bound
    clips the value) and stops; the restarts pull it back inside and find the efficiency
    that generated the measurements (gemm 0.78, attention 0.3)."""
    cases = [c for c in project_cases() if c["id"].startswith("olmo")][:6]
    prepared = [c for c in prepare(cases) if c.scenario.training.precision == "bf16"]
    prior = calibration.PRIORS["nvidia-hopper"]
    truth = calibration.with_fitted(prior, {"gemm": 0.78, "attention": 0.3})
    for case in prepared:
        case.measured = predict(case, truth)
    fitted = fit_family("nvidia-hopper", prepared, {"gemm": 3.0, "attention": 0.6})
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


def test_families_fitted_in_parallel_equal_the_serial_fit() -> None:
    prepared = two_family_cases()
    assert fit_all(prepared, processes=2) == fit_all(prepared)
