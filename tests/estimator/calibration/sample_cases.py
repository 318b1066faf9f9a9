"""Case lists shared by the calibration tests: the project's case files, and cases whose
'measurements' the model itself generated at known efficiencies."""

from __future__ import annotations

import json
from pathlib import Path

from estimator.calibration.families import predict
from estimator.calibration.loading import PROJECT_CASES, Prepared, prepare
from estimator.core import calibration

ROOT = Path(__file__).resolve().parents[3]
SHARED_CASES = ROOT.parent / "shared" / "calibration" / "cases.jsonl"
#: How close to a bound a fitted value may come before it counts as sitting at it: 1 %
#: of the bound, coarser than the fit's rounding (4 decimals) and its tolerance. [1]
AT_BOUND = 0.01


def project_cases() -> list[dict]:
    cases = []
    for path in sorted(PROJECT_CASES.glob("*.jsonl")):
        cases += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return cases


def two_family_cases() -> list[Prepared]:
    """Six OLMo cases (Hopper) and the project's Ampere cases of two sources (FlashAttention,
    fms-fsdp), their 'measurements' generated at known efficiencies so the fits have a
    definite optimum."""
    ampere = [p for p in prepare(project_cases()) if p.family == "nvidia-ampere"]
    sources = sorted({p.source for p in ampere})[:2]
    picked = [p for s in sources for p in [q for q in ampere if q.source == s][:3]]
    hopper = [c for c in project_cases() if c["id"].startswith("olmo")][:6]
    prepared = prepare(hopper) + picked
    truth = {
        "nvidia-hopper": {"gemm": 0.7, "attention": 0.3, "fp8_gemm": 0.6},
        "nvidia-ampere": {"gemm": 0.8, "attention": 0.35},
    }
    for case in prepared:
        prior = calibration.PRIORS[case.family]
        case.measured = predict(case, calibration.with_fitted(prior, truth[case.family]))
    return prepared
