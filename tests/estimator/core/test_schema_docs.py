"""docs/scenario-keys.md is rendered from the scenario schema and checked in as rendered."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from estimator.core import schema
from estimator.core.schema_docs import DOC_PATH, render

ROOT = Path(__file__).resolve().parents[3]


def test_the_checked_in_keys_page_is_the_rendered_one() -> None:
    assert DOC_PATH.read_text(encoding="utf-8") == render(), (
        "docs/scenario-keys.md is out of date: run `python -m estimator schema-docs --write`"
    )


def test_the_keys_page_lists_every_key_with_its_bounds() -> None:
    page = render()
    assert "| `margins.network_jitter` | number in [0, 10] | 1 | 0.05 |" in page
    assert page.startswith("# Scenario keys the project adds to the contract\n")
    for key in schema.KEYS:
        assert f"| `{key.path}` |" in page


def test_the_command_line_prints_the_keys_page() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "estimator", "schema-docs"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert done.stdout == render()
