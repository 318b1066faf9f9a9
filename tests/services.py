"""Helpers for tests that need a real service: skip locally, fail in CI."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator

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


@contextlib.contextmanager
def hanging_listener() -> Iterator[int]:
    """A local port that accepts connections and never answers a byte (a database or a
    Redis that hangs), for as long as the block runs."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                held.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        stop.set()
        thread.join(timeout=5)
        for connection in [*held, listener]:
            connection.close()
