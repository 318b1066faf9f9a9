"""Run the whole test suite, on PostgreSQL + Redis when they answer, else on the embedded default.

``make test`` calls this. Locally, services that do not answer are left out and the tests
that need them skip with the reason. With ``CI`` set the services are always configured, so
a missing one makes its tests fail instead. ``TRAINPLAN_TEST_EMBEDDED=1`` forces SQLite and
eager Celery (``make test-embedded``).
"""

from __future__ import annotations

import os
import socket
import sys
from urllib.parse import urlsplit

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/test"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/15"


def answers(url: str, timeout: float = 1.0) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 0), timeout):
            return True
    except OSError:
        return False


def configure(env: dict[str, str]) -> list[str]:
    """Set DATABASE_URL / REDIS_URL in ``env`` and return one line per decision."""
    if env.get("TRAINPLAN_TEST_EMBEDDED"):
        env.pop("DATABASE_URL", None)
        env.pop("REDIS_URL", None)
        return ["embedded default forced: SQLite and eager Celery"]
    in_ci = bool(env.get("CI"))
    lines = []
    for name, default in (("DATABASE_URL", DEFAULT_DATABASE_URL), ("REDIS_URL", DEFAULT_REDIS_URL)):
        url = env.get(name) or default
        if in_ci or answers(url):
            env[name] = url
            lines.append(f"{name}={url}")
        else:
            env.pop(name, None)
            lines.append(f"{name}: nothing answers at {url}; tests that need it will skip")
    return lines


def main() -> None:
    env = dict(os.environ)
    for line in configure(env):
        print(f"[run_tests] {line}", flush=True)
    argv = [sys.executable, "-m", "pytest", *sys.argv[1:]]
    os.execve(sys.executable, argv, env)  # noqa: S606 (replace this process with pytest)


if __name__ == "__main__":
    main()
