"""Helpers for tests that need a real service: skip locally, fail in CI."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import pytest


def service_missing(reason: str) -> None:
    """Skip with ``reason`` on a developer's machine; fail when the variable CI is set."""
    if os.environ.get("CI"):
        pytest.fail(f"CI requires this service: {reason}", pytrace=False)
    pytest.skip(reason)


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``check`` every 0.1 s until it holds; fail naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")
