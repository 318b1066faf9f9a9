"""The shared cache (Redis in production) as a helper that may be missing: a cache that is
down or hangs costs one call's timeout (``OPTIONS`` socket timeouts, 1 s), after which it
is skipped for :data:`RETRY_AFTER_S` by every caller in the process, instead of each
request waiting a timeout per call.

What the cache holds decides what a caller does meanwhile: a convenience (a token's last
use, a preview) is skipped; the login counters move to the database cache
``login_fallback`` (:mod:`lib.login_guard`), so a lockout never fails open.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from django.conf import settings
from django.core.cache import BaseCache, cache, caches
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

#: Seconds a cache that failed is left alone before the next call tries it again.
RETRY_AFTER_S = 10.0
#: What a cache that is down or hangs raises (Redis's errors; socket errors below them).
CACHE_ERRORS = (RedisError, OSError)
#: The cache alias the login counters fall back to (a table in the database).
LOGIN_FALLBACK = "login_fallback"

_lock = threading.Lock()
_down_until = 0.0


def cache_up() -> bool:
    """Whether the shared cache is worth a call: it has not failed in the last
    :data:`RETRY_AFTER_S` seconds."""
    return time.monotonic() >= _down_until


def cache_down(error: BaseException, *, what: str) -> None:
    """Note that the shared cache failed a call (``what`` names the caller in the log)."""
    global _down_until
    with _lock:
        first = cache_up()
        _down_until = time.monotonic() + RETRY_AFTER_S
    if first:
        logger.warning(
            "%s: cache unreachable (%s: %s); not asked again for %g s",
            what,
            type(error).__name__,
            error,
            RETRY_AFTER_S,
        )


def cache_reset() -> None:
    """Forget a failure: the next call asks the cache again (tests, and a cache known back)."""
    global _down_until
    with _lock:
        _down_until = 0.0


def cache_call[T](action: Callable[[BaseCache], T], fallback: T, *, what: str) -> T:
    """``action(cache)``, or ``fallback`` at once while the cache is down, or when it fails."""
    if not cache_up():
        return fallback
    try:
        return action(cache)
    except CACHE_ERRORS as error:
        cache_down(error, what=what)
        return fallback


def login_fallback_cache() -> BaseCache | None:
    """The database cache the login counters use while the shared cache is down; None
    where none is configured (the embedded default's memory cache cannot go down)."""
    return caches[LOGIN_FALLBACK] if LOGIN_FALLBACK in settings.CACHES else None
