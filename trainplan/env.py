"""Small, typed helpers that read settings from the environment.

Every setting that differs between the embedded default and production goes through
these helpers, so the rules for empty values and ``*_FILE`` secrets live in one place.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})


def env_str(name: str, default: str = "") -> str:
    """Return the variable, or ``default`` when it is unset or blank."""
    value = os.environ.get(name, "").strip()
    return value or default


def env_bool(name: str, default: bool = False) -> bool:
    """Parse a boolean; an unknown word is an error rather than a silent ``False``."""
    value = env_str(name).lower()
    if not value:
        return default
    if value in TRUE_WORDS:
        return True
    if value in FALSE_WORDS:
        return False
    raise ValueError(f"{name}: expected one of {sorted(TRUE_WORDS | FALSE_WORDS)}, got {value!r}")


def env_int(name: str, default: int) -> int:
    value = env_str(name)
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name}: expected an integer, got {value!r}") from None


def env_list(name: str, default: list[str]) -> list[str]:
    value = env_str(name)
    if not value:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def env_secret(name: str) -> str:
    """Read a secret from ``NAME`` or from the file named by ``NAME_FILE``.

    File-based secrets keep credentials out of process listings and shell history
    (the Docker/Kubernetes convention).
    """
    path = env_str(f"{name}_FILE")
    if path:
        return Path(path).read_text(encoding="utf-8").strip()
    return env_str(name)


def local_secret_key(path: Path) -> str:
    """A per-checkout key for the embedded default, generated once and kept in ``var/``.

    Keeping it on disk means sessions survive a restart of the development server.
    """
    if path.exists():
        return path.read_text(encoding="utf-8").strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    path.write_text(key, encoding="utf-8")
    path.chmod(0o600)
    return key
