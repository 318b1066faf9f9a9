"""Logins that resist guessing: failed logins counted per user name and per client address,
a lockout once either reaches its limit, and a request rate per address on the token endpoint.

The login page and the API's token endpoint both log in through :func:`login_authenticate`,
so both count and lock alike. Counters live in Django's cache: Redis in production, shared
by every process, memory in the embedded default. While Redis is down or hangs
(:mod:`lib.cacheguard`) they live in the database cache ``login_fallback`` instead, so the
lockout and the rate limit hold (fail closed) and a hanging Redis costs one timeout, not
one per call.
"""

from __future__ import annotations

import hashlib
import math
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, cast

from django.conf import settings
from django.contrib.auth import authenticate
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.cache import BaseCache, cache
from django.http import HttpRequest
from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle, SimpleRateThrottle

from lib.cacheguard import CACHE_ERRORS, cache_down, cache_up, login_fallback_cache

Subject = Literal["username", "address"]
REASONS: dict[str, str] = {
    "username": "failed logins for this user name",
    "address": "failed logins from your address",
    "rate": "login attempts from your address",
}


@dataclass(frozen=True)
class Lockout:
    """Logins refused for ``retry_after_s`` seconds; ``reason`` is a key of :data:`REASONS`."""

    reason: str
    retry_after_s: int

    @property
    def minutes(self) -> int:
        return max(1, math.ceil(self.retry_after_s / 60))

    @property
    def message(self) -> str:
        plural = "" if self.minutes == 1 else "s"
        return f"Too many {REASONS[self.reason]}: try again in {self.minutes} minute{plural}."

    @property
    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after_s)}


class LoginLocked(Exception):
    """A login refused without checking the password: the user name or address is locked."""

    def __init__(self, lockout: Lockout) -> None:
        super().__init__(lockout.message)
        self.lockout = lockout


def client_address(request: HttpRequest | Request) -> str:
    """The caller's address, as the throttles see it (``REST_FRAMEWORK["NUM_PROXIES"]``)."""
    # DRF reads only ``META``, which a Django request has too.
    return BaseThrottle().get_ident(cast(Request, request))


def login_authenticate(
    *, request: HttpRequest | Request, username: str, password: str
) -> AbstractBaseUser | None:
    """Django's ``authenticate``, refused while the user name or address is locked.

    A failure is counted (and raises :class:`LoginLocked` when it reaches a limit); a success
    clears the user name's failures. Raises :class:`LoginLocked` without checking the password.
    """
    address = client_address(request)
    lockout = login_lockout(username=username, address=address)
    if lockout is not None:
        raise LoginLocked(lockout)
    user = authenticate(request, username=username, password=password)
    if user is None:
        lockout = login_failure_record(username=username, address=address)
        if lockout is not None:
            raise LoginLocked(lockout)
        return None
    _counted(lambda store: store.delete(_key("failures", "username", username)))
    return user


def login_lockout(*, username: str, address: str) -> Lockout | None:
    """The lockout in force for this user name or address, if any."""
    now = time.time()
    for subject, value in (("username", username), ("address", address)):
        until = _counted(partial(_get, _key("locked", subject, value)))
        if until is not None and until > now:
            return Lockout(subject, math.ceil(until - now))
    return None


def login_failure_record(*, username: str, address: str) -> Lockout | None:
    """Count a failed login; lock what reached its limit and return the lockout, if any."""
    window_s = settings.LOGIN_LOCKOUT_MINUTES * 60
    limits: tuple[tuple[Subject, str, int], ...] = (
        ("username", username, settings.LOGIN_MAX_FAILURES_PER_USERNAME),
        ("address", address, settings.LOGIN_MAX_FAILURES_PER_ADDRESS),
    )
    for subject, value, limit in limits:
        failures = _counted(partial(_count, _key("failures", subject, value), window_s))
        if failures >= limit:
            _counted(partial(_lock, subject, value, window_s))
    return login_lockout(username=username, address=address)


def login_lockout_lift(*, username: str | None = None, address: str | None = None) -> None:
    """Forget the failures, lockout and request rate of a user name or an address."""
    keys = []
    if username is not None:
        keys += [_key(kind, "username", username) for kind in ("failures", "locked")]
    if address is not None:
        keys += [_key(kind, "address", address) for kind in ("failures", "locked")]
        keys.append(LoginRateThrottle.cache_format % {"scope": "login", "ident": address})
    _counted(lambda store: store.delete_many(keys))


class LoginRateThrottle(SimpleRateThrottle):
    """Requests per client address on the token endpoint (``DEFAULT_THROTTLE_RATES["login"]``)."""

    scope = "login"

    def get_rate(self) -> str | None:
        # Read at each request, not once at import like DRF's throttles, so tests can set it.
        rate = api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)
        return str(rate) if rate else None

    def get_cache_key(self, request: Any, view: Any) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}

    def allow_request(self, request: Any, view: Any) -> bool:
        return _counted(partial(self._allow_on, request=request, view=view))

    def _allow_on(self, store: BaseCache, *, request: Any, view: Any) -> bool:
        self.cache = store  # SimpleRateThrottle keeps its request history in self.cache
        return super().allow_request(request, view)


def _key(kind: str, subject: str, value: str) -> str:
    # Hashed: a user name may hold any character and length; case and width do not matter.
    normal = unicodedata.normalize("NFKC", value).casefold()
    return f"login-{kind}:{subject}:{hashlib.sha256(normal.encode()).hexdigest()}"


def _get(key: str, store: BaseCache) -> Any:
    return store.get(key)


def _count(key: str, window_s: int, store: BaseCache) -> int:
    """Add one to the counter at ``key``, which expires ``window_s`` after its first count."""
    store.add(key, 0, timeout=window_s)
    try:
        return int(store.incr(key))
    except ValueError:  # expired between add and incr
        store.set(key, 1, timeout=window_s)
        return 1


def _lock(subject: str, value: str, duration_s: int, store: BaseCache) -> None:
    store.set(_key("locked", subject, value), time.time() + duration_s, timeout=duration_s)
    # A fresh allowance once the lockout is over.
    store.delete(_key("failures", subject, value))


def _counted[T](action: Callable[[BaseCache], T]) -> T:
    """``action`` on the shared cache, or on the database fallback while the shared cache
    is down or hangs (:mod:`lib.cacheguard`): the counters never fail open. Without a
    fallback (the embedded default's memory cache) the cache's own error is raised."""
    if cache_up():
        try:
            return action(cache)
        except CACHE_ERRORS as error:
            cache_down(error, what="login counters")
    fallback = login_fallback_cache()
    return action(cache if fallback is None else fallback)
