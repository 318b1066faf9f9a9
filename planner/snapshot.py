"""Frozen budget snapshots: one canonical JSON document and its SHA-256 (no database).

The document is serialised with sorted keys, no insignificant whitespace and UTF-8, so the
same content always gives the same bytes and the same hash, whatever order it was built in.
A reader can check a downloaded snapshot with ``sha256sum`` after writing it out with
:func:`canonical_json`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any


def _default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    raise TypeError(f"cannot freeze a {type(value).__name__} in a snapshot")


def canonical_json(document: Mapping[str, Any]) -> bytes:
    """The document's canonical bytes: sorted keys, compact separators, UTF-8, no NaN."""
    text = json.dumps(
        document,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
        default=_default,
    )
    return text.encode("utf-8")


def snapshot_hash(document: Mapping[str, Any]) -> str:
    """Hex SHA-256 of :func:`canonical_json` of ``document``."""
    return hashlib.sha256(canonical_json(document)).hexdigest()


def snapshot_freeze(document: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """The document as stored (a JSON round trip of its canonical form) and its hash.

    Storing the round-tripped form means the stored JSON hashes to the same value when it
    is read back, which :func:`snapshot_verify` relies on.
    """
    frozen = json.loads(canonical_json(document))
    return frozen, snapshot_hash(frozen)


def snapshot_verify(document: Mapping[str, Any], expected_hash: str) -> bool:
    """True when ``document`` still hashes to ``expected_hash``."""
    return snapshot_hash(document) == expected_hash
