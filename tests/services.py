"""Helpers for tests that need a real service: skip locally, fail in CI."""

from __future__ import annotations

import os

import pytest


def service_missing(reason: str) -> None:
    """Skip with ``reason`` on a developer's machine; fail when the variable CI is set."""
    if os.environ.get("CI"):
        pytest.fail(f"CI requires this service: {reason}", pytrace=False)
    pytest.skip(reason)
