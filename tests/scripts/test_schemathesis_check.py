"""scripts/schemathesis_check.py: what it prints last when the fuzzer finds something, so a
CI log cut to its head and tail still says what failed."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import schemathesis_check as check  # noqa: E402

OUTPUT = (
    "Schemathesis v4\n"
    "  Seed: 123\n"
    "  82 operations\n"
    "=================================== FAILURES ===================================\n"
    "___ DELETE /api/v1/quotes/{id}/ ___\n"
    "1. Undocumented HTTP status code\n"
    "=================================== SUMMARY ====================================\n"
)


def test_findings_start_at_the_failures_section() -> None:
    found = check.findings(OUTPUT)
    assert found.startswith("=" * 35 + " FAILURES")
    assert "DELETE /api/v1/quotes/{id}/" in found
    assert "Seed: 123" not in found


def test_findings_without_a_failures_section_are_the_whole_output() -> None:
    assert check.findings("connection refused\n") == "connection refused\n"


def test_findings_are_cut_to_the_limit() -> None:
    found = check.findings(OUTPUT + "x" * 10_000, limit=500)
    assert len(found) == 500 + len("\n[...]")
    assert found.endswith("\n[...]")
