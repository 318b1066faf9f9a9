"""Snapshot hashing: canonical bytes, stable hashes, any change detected."""

from __future__ import annotations

import hashlib
import math
from datetime import date
from decimal import Decimal

import pytest

from planner.budgets.snapshot import canonical_json, snapshot_freeze, snapshot_hash, snapshot_verify


def test_canonical_json_sorts_keys_and_drops_whitespace() -> None:
    assert canonical_json({"b": 1, "a": {"d": [1, 2], "c": "é"}}) == (
        '{"a":{"c":"é","d":[1,2]},"b":1}'.encode()
    )


def test_hash_is_sha256_of_the_canonical_bytes_and_order_free() -> None:
    first = {"amount": Decimal("12.50"), "on": date(2026, 11, 23), "runs": [3, 1]}
    second = {"runs": [3, 1], "on": date(2026, 11, 23), "amount": Decimal("12.50")}
    expected = hashlib.sha256(b'{"amount":"12.50","on":"2026-11-23","runs":[3,1]}').hexdigest()
    assert snapshot_hash(first) == snapshot_hash(second) == expected


def test_frozen_document_verifies_and_any_change_is_detected() -> None:
    frozen, digest = snapshot_freeze({"cost": {"p50": Decimal("100.00")}, "seed": 7})
    assert snapshot_verify(frozen, digest)
    frozen["cost"]["p50"] = "100.01"
    assert not snapshot_verify(frozen, digest)


def test_nan_and_unknown_types_are_refused() -> None:
    with pytest.raises(ValueError, match="JSON compliant"):
        canonical_json({"x": math.nan})
    with pytest.raises(TypeError, match="set"):
        canonical_json({"x": {1, 2}})
