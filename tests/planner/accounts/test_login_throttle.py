"""Logins that resist guessing: failures counted per user name and address, lockouts with
429 and Retry-After on the token endpoint and the login page, and a request rate per address."""

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from pytest_django.fixtures import Settings
from rest_framework.test import APIClient

from lib.cacheguard import cache_reset
from lib.login_guard import Lockout, login_lockout_lift
from tests.services import hanging_listener

pytestmark = pytest.mark.django_db

TOKEN_URL = "/api/v1/auth/token/"
LOGIN_URL = "/accounts/login/"
USERNAMES = ("maya", "rosa", "Maya", "nobody-0", "nobody-1", "nobody-2", "nobody-3")
ADDRESSES = ("127.0.0.1", "10.0.0.9")


@pytest.fixture(autouse=True)
def fresh_counters() -> Iterator[None]:
    """Counters live in the cache, which outlives a test (Redis outlives the run)."""
    for username in USERNAMES:
        login_lockout_lift(username=username)
    for address in ADDRESSES:
        login_lockout_lift(address=address)
    yield
    for address in ADDRESSES:
        login_lockout_lift(address=address)


@pytest.fixture
def maya() -> User:
    return User.objects.create_user("maya", password="correct horse battery")


@pytest.fixture
def rosa() -> User:
    return User.objects.create_user("rosa", password="rosa staple battery")


def _token(username: str, password: str, **extra: Any) -> tuple[int, dict, str | None]:
    response = APIClient().post(TOKEN_URL, {"username": username, "password": password}, **extra)
    return response.status_code, response.json(), response.headers.get("Retry-After")


def _fail(times: int, username: str = "maya", **extra: Any) -> list[int]:
    return [_token(username, "wrong", **extra)[0] for _ in range(times)]


def test_wrong_passwords_are_400_until_the_fifth_locks_the_user_name(maya: User) -> None:
    assert _fail(4) == [400] * 4
    status, body, retry_after = _token("maya", "wrong")
    assert status == 429
    assert body == {
        "detail": "Too many failed logins for this user name: try again in 15 minutes.",
        "code": "login_locked",
    }
    assert retry_after is not None
    assert 890 <= int(retry_after) <= 900


def test_a_locked_user_name_is_refused_even_the_right_password(maya: User) -> None:
    _fail(5)
    status, body, retry_after = _token("maya", "correct horse battery")
    assert status == 429
    assert "try again in 15 minutes" in body["detail"]
    assert retry_after


def test_the_lockout_ignores_case_in_the_user_name(maya: User) -> None:
    _fail(5, "Maya")
    assert _token("maya", "correct horse battery")[0] == 429


def test_a_success_clears_the_user_names_failures(maya: User) -> None:
    _fail(4)
    assert _token("maya", "correct horse battery")[0] == 200
    assert _fail(4) == [400] * 4


def test_another_user_name_is_unaffected(maya: User, rosa: User) -> None:
    _fail(5)
    assert _token("rosa", "rosa staple battery")[0] == 200


def test_failures_from_one_address_lock_it_for_every_user_name(
    maya: User, settings: Settings
) -> None:
    settings.LOGIN_MAX_FAILURES_PER_ADDRESS = 4
    assert [_fail(1, f"nobody-{n}")[0] for n in range(3)] == [400] * 3
    status, body, retry_after = _token("nobody-3", "wrong")
    assert (status, body["detail"]) == (
        429,
        "Too many failed logins from your address: try again in 15 minutes.",
    )
    assert retry_after
    assert _token("maya", "correct horse battery")[0] == 429
    # Another address still logs in.
    assert _token("maya", "correct horse battery", REMOTE_ADDR="10.0.0.9")[0] == 200


def test_forwarded_for_headers_do_not_change_the_address(maya: User, settings: Settings) -> None:
    settings.LOGIN_MAX_FAILURES_PER_ADDRESS = 2
    _token("nobody-0", "wrong", HTTP_X_FORWARDED_FOR="203.0.113.1")
    status, body, _ = _token("nobody-1", "wrong", HTTP_X_FORWARDED_FOR="203.0.113.2")
    assert status == 429
    assert "from your address" in body["detail"]


def test_the_token_endpoint_is_throttled_per_address(maya: User, settings: Settings) -> None:
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"login": "3/min"},
    }
    assert [_token("maya", "correct horse battery")[0] for _ in range(3)] == [200] * 3
    status, body, retry_after = _token("maya", "correct horse battery")
    assert (status, body["code"]) == (429, "throttled")
    assert retry_after is not None
    assert 0 < int(retry_after) <= 60


def test_a_missing_password_is_not_counted_as_a_failure(maya: User) -> None:
    client = APIClient()
    for _ in range(6):
        assert client.post(TOKEN_URL, {"username": "maya"}).status_code == 400
    assert _token("maya", "correct horse battery")[0] == 200


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def hanging_port() -> Iterator[int]:
    """A Redis that hangs."""
    with hanging_listener() as port:
        yield port


def _redis_at(settings: Settings, port: int) -> None:
    """The production cache settings with Redis at ``port`` (down, or hanging)."""
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{port}/0",
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        },
        "login_fallback": {
            "BACKEND": "django.core.cache.backends.db.DatabaseCache",
            "LOCATION": "trainplan_login_fallback",
        },
    }
    cache_reset()


@pytest.fixture
def cache_fresh() -> Iterator[None]:
    cache_reset()
    yield
    cache_reset()


def test_with_redis_down_the_lockout_holds_on_the_database(
    maya: User, settings: Settings, cache_fresh: None
) -> None:
    _redis_at(settings, _closed_port())
    assert _fail(4) == [400] * 4
    status, body, retry_after = _token("maya", "wrong")
    assert (status, body["code"]) == (429, "login_locked")
    assert retry_after is not None
    assert _token("maya", "correct horse battery")[0] == 429  # locked, password unchecked
    status, html, _ = _log_in(Client(), "maya", "correct horse battery")
    assert status == 429
    assert "Too many failed logins for this user name" in html


def test_a_hanging_redis_costs_one_timeout_not_one_per_request(
    maya: User, settings: Settings, cache_fresh: None, hanging_port: int
) -> None:
    token = _token("maya", "correct horse battery")[1]["token"]  # before Redis hangs
    _redis_at(settings, hanging_port)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    seconds = []
    for _ in range(6):
        began = time.monotonic()
        assert client.get("/api/v1/projects/").status_code == 200
        seconds.append(time.monotonic() - began)
    assert seconds[0] < 2.5  # one socket timeout (1 s), then the cache is skipped
    assert max(seconds[1:]) < 0.5, seconds
    began = time.monotonic()
    assert _fail(5, username="rosa") == [400] * 4 + [429]  # counted in the database
    assert time.monotonic() - began < 5


def test_the_lockout_message_rounds_up_to_whole_minutes() -> None:
    assert Lockout("username", 61).message == (
        "Too many failed logins for this user name: try again in 2 minutes."
    )
    assert Lockout("address", 5).message.endswith("try again in 1 minute.")
    assert Lockout("rate", 30).headers == {"Retry-After": "30"}


# --- The login page ----------------------------------------------------------------------


def _log_in(client: Client, username: str, password: str) -> tuple[int, str, str | None]:
    response = client.post(LOGIN_URL, {"username": username, "password": password})
    return response.status_code, response.content.decode(), response.headers.get("Retry-After")


def test_the_login_page_locks_a_user_name_after_five_failures(maya: User) -> None:
    client = Client()
    for _ in range(4):
        status, html, _ = _log_in(client, "maya", "wrong")
        assert status == 200
        assert "didn't match" in html
    status, html, retry_after = _log_in(client, "maya", "wrong")
    assert status == 429
    assert "Too many failed logins for this user name: try again in 15 minutes." in html
    assert retry_after is not None
    assert int(retry_after) > 800
    status, _, _ = _log_in(client, "maya", "correct horse battery")
    assert status == 429
    assert "_auth_user_id" not in client.session


def test_the_login_page_and_the_api_share_the_counters(maya: User, rosa: User) -> None:
    client = Client()
    _fail(3)
    _log_in(client, "maya", "wrong")
    assert _log_in(client, "maya", "wrong")[0] == 429
    assert _token("maya", "correct horse battery")[0] == 429
    # Another user name logs in on the page.
    status, _, _ = _log_in(client, "rosa", "rosa staple battery")
    assert status == 302


def test_a_page_login_clears_the_failures(maya: User) -> None:
    client = Client()
    for _ in range(4):
        _log_in(client, "maya", "wrong")
    assert _log_in(client, "maya", "correct horse battery")[0] == 302
    assert _fail(4) == [400] * 4


def test_the_login_page_is_not_throttled_per_request(maya: User, settings: Settings) -> None:
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"login": "1/min"},
    }
    for _ in range(3):
        client = Client()
        assert _log_in(client, "maya", "correct horse battery")[0] == 302
