"""scripts/schemathesis_check.py: what it prints last when the fuzzer finds something, so a
CI log cut to its head and tail still says what failed."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import schemathesis_check as check  # noqa: E402

RULE = "=" * 35
HEADER = "Schemathesis v4\n  Seed: 123\n ✅  Examples (in 0.19s)\n 🚫  Coverage (in 62.98s)\n"
WARNINGS = (
    f"{RULE} WARNINGS {RULE}\n"
    "No links point to these operations - POST /api/v1/projects/ appears to supply ...\n"
    "Schema validation mismatch: 28 operations mostly rejected generated data\n"
)
FAILURES = (
    f"{RULE} FAILURES {RULE}\n"
    "___ DELETE /api/v1/quotes/{id}/ ___\n"
    "1. Undocumented HTTP status code\n"
)
ERRORS = f"{RULE} ERRORS {RULE}\n___ GET /api/v1/runs/ ___\nRead timed out (60.00s)\n"
SUMMARY = (
    f"{RULE} SUMMARY {RULE}\nErrors:\n  🚫 Network Error: 1\n{RULE} 1 error in 80.00s {RULE}\n"
)


def test_findings_keep_phases_failures_errors_and_summary_and_drop_the_warnings() -> None:
    found = check.findings(HEADER + WARNINGS + FAILURES + ERRORS + SUMMARY)
    assert found == HEADER + FAILURES + ERRORS + SUMMARY


def test_the_section_rules_split_the_output_by_name() -> None:
    names = [name for name, _ in check.sections(HEADER + WARNINGS + ERRORS + SUMMARY)]
    assert names == ["", "WARNINGS", "ERRORS", "SUMMARY", "1 error in 80.00s"]


def test_output_without_sections_is_kept_whole() -> None:
    assert check.findings("connection refused\n") == "connection refused\n"


def test_failures_are_cut_to_the_limit_and_the_summary_is_kept_whole() -> None:
    found = check.findings(HEADER + FAILURES + "x" * 10_000 + "\n" + SUMMARY, limit=500)
    assert found.endswith("\n[...]\n" + SUMMARY)
    assert len(found) == 500 + len("\n[...]\n") + len(SUMMARY)


def test_the_digest_holds_the_first_lines_of_errors_and_failures_and_the_counts() -> None:
    summary = (
        f"{RULE} SUMMARY {RULE}\n\nAPI Operations:\n  Selected: 82/85\n"
        "Failures:\n  ❌ Server error: 2\nErrors:\n  🚫 Network Error: 1\n"
        f"{RULE} 1 error in 80.00s {RULE}\n"
    )
    short = check.digest(HEADER + ERRORS + FAILURES + WARNINGS + summary, max_lines=1)
    assert short.splitlines() == [
        "ERRORS",
        "___ GET /api/v1/runs/ ___",
        "FAILURES",
        "___ DELETE /api/v1/quotes/{id}/ ___",
        "Failures:",
        "  ❌ Server error: 2",
        "Errors:",
        "  🚫 Network Error: 1",
    ]


def test_the_digest_of_output_without_sections_is_its_tail() -> None:
    assert check.digest("x" * 2_000 + "connection refused\n").endswith("connection refused\n")
