"""Comparing capacity plans: a pruned plan must equal the exhaustive one in every figure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The result's figures; only how many sizes were searched and skipped may differ.
COMPARED = ("feasible", "frontier", "points", "notes")


def assert_same_plan(pruned: Mapping[str, Any] | None, whole: Mapping[str, Any]) -> None:
    """Every figure equal, and the sizes searched plus skipped those of ``whole``."""
    assert pruned is not None
    for key in COMPARED:
        assert pruned[key] == whole[key], key
    sizes = pruned["points_evaluated"] + pruned.get("points_skipped", 0)
    assert sizes == whole["points_evaluated"] + whole.get("points_skipped", 0)
