"""calibration.py: the priors' scaling rule, applying fitted values, the fp8-only families'
bf16 fraction, the spreads, reading the fit file, and a fit of synthetic measurements that
finds the efficiencies that generated them."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
from numpy.testing import assert_allclose

from estimator.core import calibration, validate_scenario
from estimator.core.calibration import (
    PRIORS,
    UNMEASURED_SIGMA,
    Efficiency,
    efficiency_for,
    family_sigma,
    with_bf16_from_fp8,
    with_fitted,
)

from .scenarios import SMALL, scenario

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("family", "scale", "attention"),
    [
        ("nvidia-ampere", 1.0, None),  # measured families start from the Hopper fit itself
        ("nvidia-hopper", 1.0, None),
        ("amd-cdna3", 0.55 / 0.80, None),  # MI300X MAMF 0.55 against Hopper's 0.80
        ("generic", 0.7, None),  # no published MAMF: a conservative 0.7
        ("nvidia-volta", 0.7, 0.05),  # and no FlashAttention before sm80
    ],
)
def test_priors_scale_the_hopper_fit_by_the_familys_matmul_fraction(
    family: str, scale: float, attention: float | None
) -> None:
    """gemm 0.690 and attention 0.189 (the Hopper fit) times the family's maximum achievable
    matmul fraction over Hopper's, rounded to 3 decimals."""
    prior = PRIORS[family]
    assert prior.gemm == round(0.690 * scale, 3)
    assert prior.attention == (round(0.189 * scale, 3) if attention is None else attention)
    assert prior.fitted == ()


def test_with_fitted_replaces_the_fields_and_names_them() -> None:
    prior = PRIORS["nvidia-hopper"]
    fitted = with_fitted(prior, {"gemm": 0.61, "tp_overlap": 0.4})
    assert (fitted.gemm, fitted.tp_overlap) == (0.61, 0.4)
    assert fitted.fitted == ("gemm", "tp_overlap")
    assert dataclasses.replace(fitted, gemm=prior.gemm, tp_overlap=0.0, fitted=()) == prior


def test_fp8_gemm_fraction_falls_back_to_gemm() -> None:
    assert Efficiency(gemm=0.6, attention=0.3).fp8_gemm_fraction == 0.6
    assert Efficiency(gemm=0.6, attention=0.3, fp8_gemm=0.45).fp8_gemm_fraction == 0.45


def test_with_bf16_from_fp8_caps_the_fraction_and_rounds_it() -> None:
    """Reference bf16 / fp8 = 0.6 / 0.5 = 1.2: fp8 0.5125 gives 0.615; fp8 0.9 gives 1.08,
    capped at 0.95 (the fit's bound on a matmul fraction)."""
    hopper = with_fitted(PRIORS["nvidia-hopper"], {"gemm": 0.6, "fp8_gemm": 0.5})
    blackwell = PRIORS["nvidia-blackwell"]
    table = with_bf16_from_fp8(
        {
            "nvidia-hopper": hopper,
            "nvidia-blackwell": with_fitted(blackwell, {"fp8_gemm": 0.5125}),
            "amd-cdna3": with_fitted(PRIORS["amd-cdna3"], {"fp8_gemm": 0.9}),
        }
    )
    assert table["nvidia-blackwell"].gemm == 0.615
    assert table["amd-cdna3"].gemm == 0.95


def test_with_bf16_from_fp8_needs_a_reference_measured_in_both() -> None:
    only_bf16 = with_fitted(PRIORS["nvidia-hopper"], {"gemm": 0.6})
    fp8_only = with_fitted(PRIORS["nvidia-blackwell"], {"fp8_gemm": 0.8})
    table = {"nvidia-hopper": only_bf16, "nvidia-blackwell": fp8_only}
    assert with_bf16_from_fp8(table) == table
    assert with_bf16_from_fp8({"nvidia-blackwell": fp8_only}) == {"nvidia-blackwell": fp8_only}


def test_family_sigma_is_the_fitted_spread_or_the_wide_default() -> None:
    for family, fit in calibration.FAMILY_FITS.items():
        assert family_sigma(family) == (fit.sigma if fit.cases else UNMEASURED_SIGMA)
    assert family_sigma("generic") == UNMEASURED_SIGMA
    assert family_sigma("no-such-family") == UNMEASURED_SIGMA


def test_efficiency_for_an_unknown_family_is_generic() -> None:
    assert efficiency_for("no-such-family") == efficiency_for("generic") == PRIORS["generic"]
    assert efficiency_for("nvidia-volta") == PRIORS["nvidia-volta"]  # unmeasured: its prior


def test_efficiency_for_a_measured_family_carries_the_fit_file() -> None:
    """What the estimator runs on is what ``estimator/data/calibration.json`` says."""
    record = json.loads(calibration.FIT_PATH.read_text(encoding="utf-8"))
    measured = {f: e for f, e in record["families"].items() if e["fitted"]}
    assert measured
    for family, entry in measured.items():
        efficiency = efficiency_for(family)
        assert set(efficiency.fitted) == set(entry["fitted"])
        for name, value in entry["fitted"].items():
            assert getattr(efficiency, name) == value, (family, name)


def test_load_fits_reads_back_a_synthetic_fit_file(tmp_path: Path) -> None:
    path = tmp_path / "calibration.json"
    record = {
        "families": {
            "nvidia-hopper": {
                "fitted": {"gemm": 0.61, "attention": 0.33},
                "cases": 12,
                "sources": 3,
                "sigma": 0.11,
                "bias": -0.02,
            },
            "amd-cdna2": {"fitted": {}, "cases": 1, "sources": 1, "sigma": 0.36},
        }
    }
    path.write_text(json.dumps(record), encoding="utf-8")
    fits, raw = calibration._load_fits(path)
    assert raw == record
    hopper = fits["nvidia-hopper"]
    assert (hopper.cases, hopper.sources, hopper.sigma, hopper.bias) == (12, 3, 0.11, -0.02)
    assert fits["amd-cdna2"].fitted == {}
    assert fits["amd-cdna2"].bias == 0.0  # absent: 0
    applied = with_fitted(PRIORS["nvidia-hopper"], hopper.fitted)
    assert (applied.gemm, applied.attention) == (0.61, 0.33)
    assert calibration._load_fits(tmp_path / "absent.json") == ({}, {})


def test_a_fit_of_synthetic_measurements_recovers_gemm_and_attention(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Throughputs the model itself predicts at gemm 0.62 and attention 0.28, on layouts
    whose attention share differs (2k to 16k tokens per sequence), are fitted back to 2 %
    by the project's fit (``scripts/calibration_fit.py``), written in the fit file's format
    and read back through :mod:`calibration` to predictions within 1 %."""
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    import calibration_fit as fitting

    layouts = [
        (2048, {"tp": 1, "pp": 1, "dp": 16, "micro_batch_size": 2}),
        (4096, {"tp": 2, "pp": 1, "dp": 8, "micro_batch_size": 1}),
        (8192, {"tp": 2, "pp": 2, "dp": 4, "micro_batch_size": 1}),
        (16384, {"tp": 4, "pp": 1, "dp": 4, "micro_batch_size": 1}),
    ]
    cases = [
        fitting.Prepared(
            case={"id": f"synthetic-{seq_len}", "source_group": f"synthetic-{seq_len}"},
            scenario=validate_scenario(
                scenario(SMALL, model={"seq_len": seq_len}, parallelism=layout)
            ),
            measured=0.0,
        )
        for seq_len, layout in layouts
    ]
    prior = PRIORS["nvidia-hopper"]
    truth = with_fitted(prior, {"gemm": 0.62, "attention": 0.28})
    for case in cases:
        case.measured = fitting.predict(case, truth)
    fitted = fitting.fit_family("nvidia-hopper", cases)
    assert_allclose(fitted["gemm"], 0.62, rtol=0.02)
    assert_allclose(fitted["attention"], 0.28, rtol=0.02)

    path = tmp_path / "calibration.json"
    entry = {"fitted": fitted, "cases": len(cases), "sources": len(cases), "sigma": 0.05}
    path.write_text(json.dumps({"families": {"nvidia-hopper": entry}}), encoding="utf-8")
    fits, _ = calibration._load_fits(path)
    recovered = with_fitted(prior, fits["nvidia-hopper"].fitted)
    for case in cases:
        error = math.log(fitting.predict(case, recovered) / case.measured)
        assert abs(error) < 0.01, case.case["id"]
