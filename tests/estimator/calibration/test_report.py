"""estimator.calibration.report: the sections of docs/accuracy.md."""

from __future__ import annotations

from estimator.calibration.report import not_scored_section


def test_cases_not_scored_are_listed_with_their_reason_and_evidence() -> None:
    case = {
        "id": "x",
        "flags": ["contradicted_by_publication"],
        "measured": {"tokens_per_s_per_gpu": 1.0},
        "excluded_because": "the paper says half",
    }
    lines = not_scored_section([case])
    assert "| `x` | flag contradicted_by_publication | the paper says half |" in lines
    assert not_scored_section([]) == []
