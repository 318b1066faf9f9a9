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

from estimator.calibration.families import fit_family, predict
from estimator.calibration.loading import Prepared
from estimator.core import calibration, estimate, validate_scenario
from estimator.core.calibration import (
    PRIORS,
    UNMEASURED_SIGMA,
    Efficiency,
    efficiency_for,
    family_sigma,
    with_bf16_from_fp8,
    with_fitted,
)
from estimator.core.estimate import stack_alternatives
from estimator.core.montecarlo import estimate_with_uncertainty

from .scenarios import SMALL, scenario

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("family", "scale", "attention"),
    [
        # MAMF (stas00/ml-engineering) of the family's best device over GH200's 83.8 %
        ("nvidia-ampere", 0.869 / 0.838, None),  # A100 SXM 86.9 %
        ("nvidia-hopper", 1.0, None),
        ("nvidia-blackwell", 0.786 / 0.838, None),  # B300 78.6 %
        ("intel-gaudi", 0.969 / 0.838, None),  # Gaudi 2 96.9 %
        ("amd-cdna3", 0.604 / 0.838, None),  # MI325X 60.4 %
        ("google-tpu", 0.7, None),  # no published MAMF: a conservative 0.7
        ("generic", 0.7, None),
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
    """Reference bf16 / fp8 = 0.6 / 0.5 = 1.2: fp8 0.6125 gives 0.735; fp8 0.9 gives 1.08,
    capped at the family's hardware limit (MI325X's 60.4 %)."""
    hopper = with_fitted(PRIORS["nvidia-hopper"], {"gemm": 0.6, "fp8_gemm": 0.5})
    blackwell = PRIORS["nvidia-blackwell"]
    table = with_bf16_from_fp8(
        {
            "nvidia-hopper": hopper,
            "nvidia-blackwell": with_fitted(blackwell, {"fp8_gemm": 0.6125}),
            "amd-cdna3": with_fitted(PRIORS["amd-cdna3"], {"fp8_gemm": 0.9}),
        }
    )
    assert table["nvidia-blackwell"].gemm == 0.735
    assert table["amd-cdna3"].gemm == calibration.hardware_limit("amd-cdna3", "gemm").value


def test_with_bf16_from_fp8_needs_a_reference_measured_in_both() -> None:
    only_bf16 = with_fitted(PRIORS["nvidia-hopper"], {"gemm": 0.6})
    fp8_only = with_fitted(PRIORS["nvidia-blackwell"], {"fp8_gemm": 0.8})
    table = {"nvidia-hopper": only_bf16, "nvidia-blackwell": fp8_only}
    assert with_bf16_from_fp8(table) == table
    assert with_bf16_from_fp8({"nvidia-blackwell": fp8_only}) == {"nvidia-blackwell": fp8_only}


def test_family_sigma_is_the_fitted_spread_or_the_wide_default() -> None:
    """A calibrated stack carries the family's spread; the pooled stack (no framework
    named) adds the between-stack spread in quadrature."""
    tau = calibration.BETWEEN_STACK_SIGMA
    named = calibration.calibrated_stacks()[0]
    for family, fit in calibration.FAMILY_FITS.items():
        own = fit.sigma if fit.cases else UNMEASURED_SIGMA
        assert family_sigma(family, named) == own
        assert family_sigma(family) == pytest.approx(math.hypot(own, tau), rel=1e-12)
    assert family_sigma("generic", named) == UNMEASURED_SIGMA
    assert family_sigma("no-such-family", named) == UNMEASURED_SIGMA


def test_efficiency_for_an_unknown_family_is_generic() -> None:
    pooled = calibration.stack_factor("pooled")
    generic = calibration.with_stack(PRIORS["generic"], "generic", pooled)
    assert efficiency_for("no-such-family") == efficiency_for("generic") == generic
    # unmeasured: its prior, at the pooled stack
    volta = calibration.with_stack(PRIORS["nvidia-volta"], "nvidia-volta", pooled)
    assert efficiency_for("nvidia-volta") == volta


def test_with_stack_scales_kernels_up_to_the_hardware_and_overheads_down() -> None:
    """A stack factor multiplies the kernel fractions, each capped at the family's cited
    limit, and divides the software overheads."""
    hopper = with_fitted(PRIORS["nvidia-hopper"], {"gemm": 0.70, "attention": 0.30})
    faster = calibration.with_stack(hopper, "nvidia-hopper", 1.25)
    limit = calibration.hardware_limit("nvidia-hopper", "gemm").value
    assert faster.gemm == limit < 0.70 * 1.25  # capped at GH200's 83.8 %
    assert faster.attention == pytest.approx(0.30 * 1.25, rel=1e-12)
    assert faster.overhead_scale == pytest.approx(1 / 1.25, rel=1e-12)
    assert calibration.with_stack(hopper, "nvidia-hopper", 1.0) is hopper


def test_flashattention_3_class_attention_on_hopper_for_the_tuned_stack_only() -> None:
    """Transformer Engine's fused attention and FlashAttention-3 run 1.5-2.0x FA2's forward
    and 1.5-1.75x its backward on H100 (Shah et al. 2024): the low end, capped at FA3's
    75 %; other stacks and other families keep the family's FlashAttention-2 class."""
    assert calibration.attention_speedup("nvidia-hopper", "megatron-core") == 1.5
    for family, stack in (
        ("nvidia-hopper", "pytorch-native"),
        ("nvidia-hopper", "pooled"),
        ("nvidia-ampere", "megatron-core"),  # FA3 needs sm90
        ("nvidia-blackwell", "megatron-core"),
    ):
        assert calibration.attention_speedup(family, stack) == 1.0, (family, stack)
    hopper = with_fitted(PRIORS["nvidia-hopper"], {"gemm": 0.70, "attention": 0.30})
    tuned = calibration.with_stack(hopper, "nvidia-hopper", 1.1, attention=1.5)
    assert tuned.attention == pytest.approx(0.30 * 1.1 * 1.5, rel=1e-12)
    assert tuned.gemm == pytest.approx(0.70 * 1.1, rel=1e-12)  # matmuls: the factor only
    capped = calibration.with_stack(hopper, "nvidia-hopper", 1.0, attention=3.0)
    assert capped.attention == calibration.hardware_limit("nvidia-hopper", "attention").value
    assert capped.gemm == hopper.gemm
    base = calibration.FAMILY_EFFICIENCY["nvidia-hopper"]
    factor = calibration.stack_factor("megatron-core")
    expected = min(base.attention * factor * 1.5, 0.75)
    assert efficiency_for("nvidia-hopper", "megatron-core").attention == pytest.approx(expected)


def test_every_hardware_limit_cites_its_source() -> None:
    for family, limits in calibration.HARDWARE_LIMITS.items():
        for field, limit in limits.items():
            assert 0.0 < limit.value <= 1.0, (family, field)
            assert len(limit.source) > 20, (family, field)
    assert calibration.hardware_limit("amd-cdna3", "fp8_gemm").value == 0.604  # gemm's
    assert calibration.hardware_limit("google-tpu", "gemm").value == 1.0  # the datasheet


def test_efficiency_for_a_measured_family_carries_the_fit_file() -> None:
    """What the estimator runs on is what ``estimator/data/calibration.json`` says."""
    record = json.loads(calibration.FIT_PATH.read_text(encoding="utf-8"))
    measured = {f: e for f, e in record["families"].items() if e["fitted"]}
    assert measured
    for family, entry in measured.items():
        efficiency = calibration.FAMILY_EFFICIENCY[family]  # the pooled stack's reference
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


def test_a_fit_of_synthetic_measurements_recovers_gemm_and_attention(tmp_path: Path) -> None:
    """Throughputs the model itself predicts at gemm 0.62 and attention 0.28, on layouts
    whose attention share differs (2k to 16k tokens per sequence), are fitted back to 2 %
    by the project's fit (:mod:`estimator.calibration.families`), written in the fit file's
    format and read back through :mod:`calibration` to predictions within 1 %."""
    layouts = [
        (2048, {"tp": 1, "pp": 1, "dp": 16, "micro_batch_size": 2}),
        (4096, {"tp": 2, "pp": 1, "dp": 8, "micro_batch_size": 1}),
        (8192, {"tp": 2, "pp": 2, "dp": 4, "micro_batch_size": 1}),
        (16384, {"tp": 4, "pp": 1, "dp": 4, "micro_batch_size": 1}),
    ]
    cases = [
        Prepared(
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
        case.measured = predict(case, truth)
    fitted = fit_family("nvidia-hopper", cases)
    assert_allclose(fitted["gemm"], 0.62, rtol=0.02)
    assert_allclose(fitted["attention"], 0.28, rtol=0.02)

    path = tmp_path / "calibration.json"
    entry = {"fitted": fitted, "cases": len(cases), "sources": len(cases), "sigma": 0.05}
    path.write_text(json.dumps({"families": {"nvidia-hopper": entry}}), encoding="utf-8")
    fits, _ = calibration._load_fits(path)
    recovered = with_fitted(prior, fits["nvidia-hopper"].fitted)
    for case in cases:
        error = math.log(predict(case, recovered) / case.measured)
        assert abs(error) < 0.01, case.case["id"]


# --- Software stacks ---------------------------------------------------------------------

#: Llama 3 70B on 64 H100s at one layout every stack named below runs (FSDP over 8 nodes,
#: TP 8 inside each), so the stacks differ only in what the calibration says of them.
STACK_SCENARIO = {
    "format_version": 1,
    "model": {"num_layers": 80, "hidden_size": 8192, "num_attention_heads": 64,
              "num_kv_heads": 8, "ffn_hidden_size": 28672, "gated_mlp": True,
              "vocab_size": 128256, "seq_len": 8192},
    "training": {"tokens": 1e12, "global_batch_size": 128, "precision": "bf16"},
    "cluster": {"accelerator": "H100-SXM", "num_gpus": 64},
    "parallelism": {"tp": 8, "pp": 1, "dp": 8, "cp": 1, "micro_batch_size": 1,
                    "zero_stage": 3, "recompute": "selective"},
}  # fmt: skip


def _on(framework: str | None) -> dict:
    return STACK_SCENARIO if framework is None else {**STACK_SCENARIO, "framework": framework}


def test_an_auto_stack_lies_between_the_tuned_and_the_pytorch_native_stacks() -> None:
    """Left to "auto", the estimate assumes the pooled (median) stack: slower than NVIDIA's
    tuned stack, faster than the PyTorch-native one, as their calibrated factors are."""
    speed = {
        name: estimate(_on(framework))["tokens_per_s_per_gpu"]
        for name, framework in (("auto", None), ("tuned", "megatron-lm"),
                                ("native", "torchtitan"))
    }  # fmt: skip
    assert speed["native"] < speed["auto"] < speed["tuned"]
    result = estimate(_on(None))
    assert result["software_stack"]["id"] == "pooled"
    relative = stack_alternatives(_on(None), result)["alternatives"]
    assert relative["megatron-core"]["relative_speed"] == pytest.approx(
        speed["tuned"] / speed["auto"], rel=0.02
    )


def test_a_stated_stack_moves_the_estimate_and_narrows_the_band() -> None:
    """Naming the framework removes the between-stack spread from the band."""

    def band(framework: str | None) -> tuple[float, float]:
        result = estimate_with_uncertainty(_on(framework), seed=7, samples=2000)
        spread = result["percentiles"]["tokens_per_s_per_gpu"]
        return result["tokens_per_s_per_gpu"], spread["p90"] / spread["p10"]

    auto_speed, auto_width = band(None)
    stated_speed, stated_width = band("torchtitan")
    assert stated_speed != pytest.approx(auto_speed, rel=0.01)
    assert stated_width < auto_width


def test_a_tpu_estimate_offers_no_gpu_stack_as_an_alternative() -> None:
    """TPUs run MaxText alone: the stacks of GPU frameworks are no alternative there."""
    tpu = {**STACK_SCENARIO, "cluster": {"accelerator": "TPU-v5p", "num_gpus": 64}}
    result = estimate(tpu)
    assert result["software_stack"]["id"] == "maxtext"
    assert stack_alternatives(tpu, result)["alternatives"] == {
        "maxtext": pytest.approx({"name": "MaxText / JAX (XLA)", "relative_speed": 1.0})
    }


def _mlperf_gpt3_series() -> list[dict]:
    path = ROOT / "estimator" / "calibration" / "cases" / "mlperf-nvidia.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    series = [r for r in rows if r["id"].startswith("mlperf-v31-nvidia-gpt3-dgxh100-")]
    return sorted(series, key=lambda r: r["scenario"]["cluster"]["num_gpus"])


def test_a_published_weak_scaling_series_within_ten_percent_at_each_point() -> None:
    """NVIDIA's MLPerf Training v3.1 GPT-3 175B submissions on 512 to 10,752 H100s: the
    data-parallel group grows with the cluster, and the measured throughput per GPU falls
    as the reduction grows. At the tuned stack the estimate follows every point within
    10 %, and the fall from the smallest to the largest within 10 points."""
    series = _mlperf_gpt3_series()
    gpus = [r["scenario"]["cluster"]["num_gpus"] for r in series]
    assert gpus == [512, 768, 4096, 8192, 10752]
    measured, predicted = [], []
    for row in series:
        result = estimate({**row["scenario"], "framework": "megatron-lm"})
        assert result["software_stack"]["id"] == "megatron-core"
        measured.append(row["measured"]["tokens_per_s_per_gpu"])
        predicted.append(result["tokens_per_s_per_gpu"])
    for n, p, m in zip(gpus, predicted, measured, strict=True):
        assert abs(p / m - 1) <= 0.10, n
    fall = (measured[-1] / measured[0], predicted[-1] / predicted[0])
    assert abs(fall[1] - fall[0]) <= 0.10
