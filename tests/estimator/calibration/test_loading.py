"""estimator.calibration.loading: the case files, which cases count, and each case's source
and stack (no database)."""

from __future__ import annotations

from estimator.calibration.loading import source_of, stack_of, unscored_reason
from estimator.core.frameworks import STACKS

from .sample_cases import project_cases

CASE_KEYS = {"id", "source", "hardware_row", "scenario", "measured", "measured_basis", "quality",
             "notes", "flags"}  # fmt: skip


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
    reasons = {c["id"]: unscored_reason(c) for c in project_cases()}
    unscored = {k: v for k, v in reasons.items() if v is not None}
    assert len(unscored) <= 3, unscored
    assert all(v for v in unscored.values())


def test_a_case_another_publication_contradicts_says_how() -> None:
    # The flag keeps it out of the fit and the scores; the report shows the evidence.
    flagged = [c for c in project_cases() if "contradicted_by_publication" in c["flags"]]
    assert flagged  # the ORNL Crusher log (2.2x its author's published figure)
    for case in flagged:
        assert unscored_reason(case) == "flag contradicted_by_publication"
        assert len(case.get("excluded_because", "")) > 40, case["id"]


def test_source_is_the_publication() -> None:
    assert source_of({"id": "narayanan21-t2-04"}) == "narayanan21"
    assert source_of({"id": "mlperf-v50-nvidia-gpt3"}) == "mlperf"


def test_every_case_names_a_known_stack() -> None:
    for case in project_cases():
        assert stack_of(case) in STACKS
