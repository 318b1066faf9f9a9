"""Failures answer the way the caller speaks: JSON under /api/, pages elsewhere, and 503 (not
500) while the database is unreachable."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import OperationalError
from django.db.backends.utils import CursorWrapper
from django.test import Client

from lib import http
from tests.services import hanging_listener

ROOT = Path(__file__).resolve().parents[2]
FIVE_MEGABYTES = b'{"username": "' + b"a" * 5_000_000 + b'"}'

pytestmark = pytest.mark.django_db


@pytest.fixture
def database_down(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every query fails as it does when PostgreSQL stops answering."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise OperationalError("connection refused: is the server running?")

    monkeypatch.setattr(CursorWrapper, "execute", refuse)
    monkeypatch.setattr(CursorWrapper, "executemany", refuse)


@pytest.fixture
def quiet_client() -> Client:
    """A client that gets the response a real caller would, not the exception."""
    return Client(raise_request_exception=False)


def test_unknown_api_url_answers_json_404(client: Client) -> None:
    response = client.get("/api/v1/no-such-thing/")
    assert response.status_code == 404
    assert response.json() == {"detail": "Not found.", "code": "not_found"}


def test_unknown_page_still_answers_an_html_404(client: Client) -> None:
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


def test_anonymous_api_call_answers_401_naming_the_token_scheme(client: Client) -> None:
    response = client.get("/api/v1/projects/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert response.json()["code"] == "not_authenticated"


def test_body_over_the_upload_limit_answers_json_413_on_the_api(client: Client) -> None:
    response = client.post("/api/v1/auth/token/", FIVE_MEGABYTES, content_type="application/json")
    assert response.status_code == 413
    assert response.json() == {"detail": "Request body too large.", "code": "payload_too_large"}


def test_body_over_the_upload_limit_answers_413_on_a_page(client: Client) -> None:
    response = client.post("/accounts/login/", {"username": "maya", "password": "x" * 3_000_000})
    assert response.status_code == 413


def test_database_outage_answers_json_503_on_the_api(
    quiet_client: Client, database_down: None
) -> None:
    response = quiet_client.get("/api/v1/projects/", HTTP_AUTHORIZATION="Token abc123")
    assert response.status_code == 503
    assert response.json() == {"detail": "database unavailable", "code": "database_unavailable"}
    assert response["Retry-After"] == "5"


def test_database_outage_answers_json_503_for_a_token(
    quiet_client: Client, database_down: None
) -> None:
    response = quiet_client.post(
        "/api/v1/auth/token/",
        {"username": "maya", "password": "maya-demo-pass"},
        content_type="application/json",
    )
    assert response.status_code == 503
    assert response.json()["code"] == "database_unavailable"


def test_database_outage_answers_a_503_page_elsewhere(
    quiet_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    quiet_client.force_login(User.objects.create_user("maya"))
    monkeypatch.setattr(CursorWrapper, "execute", _refuse)
    response = quiet_client.get("/projects/")
    assert response.status_code == 503
    assert "temporarily unavailable" in response.content.decode()


def _refuse(*args: Any, **kwargs: Any) -> None:
    raise OperationalError("connection refused")


def test_server_error_is_503_only_for_a_database_outage(rf: Any) -> None:
    request = rf.get("/api/v1/projects/")
    try:
        raise OperationalError("server closed the connection unexpectedly")
    except OperationalError:
        assert http.server_error(request).status_code == 503
    try:
        raise KeyError("a bug")
    except KeyError:
        response = http.server_error(request)
    assert response.status_code == 500
    assert json.loads(response.content) == {"detail": "Server error.", "code": "server_error"}


def test_an_outage_is_recognised_through_the_errors_it_caused() -> None:
    wrapped = RuntimeError("could not load the session")
    wrapped.__cause__ = OperationalError("connection refused")
    assert http.is_database_outage(wrapped)
    assert not http.is_database_outage(ValueError("bad input"))


# --- A real server whose database does not answer ---------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve(database_url: str, var_dir: Path) -> Iterator[str]:
    """gunicorn with production settings and ``database_url``, until the test is done."""
    port = _free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_DEBUG": "0",
        "DJANGO_SECURE_SSL_REDIRECT": "0",
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "TRAINPLAN_VAR_DIR": str(var_dir),
    }
    env.pop("REDIS_URL", None)
    gunicorn = Path(sys.executable).parent / "gunicorn"
    command = [str(gunicorn), "trainplan.wsgi", f"--bind=127.0.0.1:{port}", "--threads=2"]
    server = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    base_url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{base_url}/livez", timeout=1)  # noqa: S310
            break
        except OSError:
            time.sleep(0.1)
    yield base_url
    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:  # a worker stuck on the database: no graceful end
        server.kill()
        server.wait(timeout=10)


@pytest.fixture(scope="module")
def server_without_database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """gunicorn with production settings and a DATABASE_URL nothing listens at."""
    url = f"postgres://trainplan@127.0.0.1:{_free_port()}/trainplan"
    yield from _serve(url, tmp_path_factory.mktemp("var"))


@pytest.fixture(scope="module")
def server_with_hanging_database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """gunicorn whose database accepts connections and never answers a byte."""
    with hanging_listener() as port:
        url = f"postgres://trainplan@127.0.0.1:{port}/trainplan"
        yield from _serve(url, tmp_path_factory.mktemp("var"))


def _fetch(url: str, **kwargs: Any) -> tuple[int, str, bytes]:
    request = urllib.request.Request(url, **kwargs)  # noqa: S310 (the test's own server)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read()


@pytest.mark.parametrize(
    ("path", "options"),
    [
        ("/api/v1/projects/", {"headers": {"Authorization": "Token abc123"}}),
        (
            "/api/v1/auth/token/",
            {
                "data": b'{"username": "maya", "password": "x"}',
                "headers": {"Content-Type": "application/json"},
            },
        ),
    ],
    ids=["api", "token"],
)
def test_a_server_without_its_database_answers_the_api_with_json_503(
    server_without_database: str, path: str, options: dict[str, Any]
) -> None:
    status, content_type, body = _fetch(server_without_database + path, **options)
    assert (status, content_type) == (503, "application/json")
    assert json.loads(body)["detail"] == "database unavailable"


def test_a_server_without_its_database_still_serves_the_schema_and_liveness(
    server_without_database: str,
) -> None:
    assert _fetch(server_without_database + "/api/schema/")[0] == 200
    assert _fetch(server_without_database + "/livez")[:2] == (200, "application/json")
    status, _, body = _fetch(server_without_database + "/readyz")
    assert status == 503
    assert json.loads(body)["down"] == ["database"]


def test_a_server_without_its_database_answers_pages_with_a_503_page(
    server_without_database: str,
) -> None:
    headers = {"Cookie": "sessionid=abcdefghijklmnopqrstuvwxyz012345"}
    status, content_type, body = _fetch(server_without_database + "/projects/", headers=headers)
    assert status == 503
    assert content_type.startswith("text/html")
    assert b"temporarily unavailable" in body


@pytest.mark.parametrize(
    ("path", "options", "content_type"),
    [
        ("/api/v1/projects/", {"headers": {"Authorization": "Token abc123"}}, "application/json"),
        (
            "/api/v1/auth/token/",
            {
                "data": b'{"username": "maya", "password": "x"}',
                "headers": {"Content-Type": "application/json"},
            },
            "application/json",
        ),
        (
            "/projects/",
            {"headers": {"Cookie": "sessionid=abcdefghijklmnopqrstuvwxyz012345"}},
            "text/html; charset=utf-8",
        ),
    ],
    ids=["api", "token", "page"],
)
def test_a_database_that_never_answers_gives_a_503_within_seconds(
    server_with_hanging_database: str, path: str, options: dict[str, Any], content_type: str
) -> None:
    """The connection gives up after DJANGO_DB_CONNECT_TIMEOUT_S (2 s), not gunicorn's 30 s."""
    began = time.monotonic()
    status, answered_as, body = _fetch(server_with_hanging_database + path, **options)
    elapsed = time.monotonic() - began
    assert (status, answered_as) == (503, content_type)
    assert elapsed < 5.0, f"answered after {elapsed:.1f} s"
    if content_type == "application/json":
        assert json.loads(body)["code"] == "database_unavailable"


def test_postgresql_connections_carry_the_statement_timeout() -> None:
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("the statement timeout is PostgreSQL's (the embedded default is SQLite)")
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "30s"
