import hashlib
import re
import threading
import urllib.request
from collections.abc import Iterator

import pytest
import yaml
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from lib.api import SchemaView
from lib.login_guard import login_lockout_lift

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_counters() -> Iterator[None]:
    """The token endpoint counts logins per address in the cache, which outlives a test."""
    login_lockout_lift(address="127.0.0.1", username="maya")
    yield
    login_lockout_lift(address="127.0.0.1", username="maya")


@pytest.fixture
def user() -> User:
    return User.objects.create_user("maya", password="correct horse battery")


def test_token_endpoint_returns_a_token_that_authenticates(user: User) -> None:
    api = APIClient()
    response = api.post(
        "/api/v1/auth/token/", {"username": "maya", "password": "correct horse battery"}
    )
    assert response.status_code == 200
    assert set(response.json()) == {"token", "expiry"}
    token = response.json()["token"]
    api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert api.get("/api/v1/").status_code == 200


def test_token_endpoint_rejects_a_wrong_password_with_400(user: User) -> None:
    response = APIClient().post("/api/v1/auth/token/", {"username": "maya", "password": "nope"})
    assert response.status_code == 400
    assert "non_field_errors" in response.json()


def test_token_endpoint_names_a_missing_field() -> None:
    response = APIClient().post("/api/v1/auth/token/", {"username": "maya"})
    assert response.status_code == 400
    assert response.json()["password"] == ["This field is required."]


def test_api_root_needs_authentication() -> None:
    response = APIClient().get("/api/v1/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert response.json()["code"] == "not_authenticated"


def test_a_wrong_token_is_401_even_with_a_session(user: User, client: Client) -> None:
    client.force_login(user)
    response = client.get("/api/v1/", HTTP_AUTHORIZATION="Token not-a-token")
    assert response.status_code == 401
    assert response.json()["code"] == "authentication_failed"


def test_session_writes_still_need_the_csrf_token(user: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    response = client.post("/api/v1/projects/", {"name": "x"}, content_type="application/json")
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]


def test_session_login_reaches_the_api(user: User, client: Client) -> None:
    client.force_login(user)
    assert client.get("/api/v1/").status_code == 200


def test_openapi_schema_and_docs_page_are_served_without_a_cdn(client: Client) -> None:
    schema = client.get("/api/schema/")
    assert schema.status_code == 200
    assert b"openapi:" in schema.content
    assert b"/api/v1/auth/token/" in schema.content
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    html = docs.content.decode()
    assert "swagger-ui" in html
    # No script or style from a CDN (a random CSRF token may contain the letters "cdn").
    assert not re.search(r"""(src|href)=["'](https?:)?//""", html)


def _schema(client: Client) -> dict:
    return yaml.safe_load(client.get("/api/schema/").content)


def test_schema_documents_every_operations_error_answers(client: Client) -> None:
    schema = _schema(client)
    assert set(schema["components"]["schemas"]["Error"]["properties"]) == {"detail", "code"}
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            documented = set(operation["responses"])
            expected = {"400", "401", "403", "404", "414", "429", "431", "503"}
            if method in ("post", "put", "patch"):
                expected |= {"409", "413"}
            assert expected <= documented, (method, path, expected - documented)
            assert not any(code.startswith("5") and code != "503" for code in documented)
            # gunicorn answers an over-long request line or header itself, in HTML: no JSON.
            assert "content" not in operation["responses"]["414"], (method, path)
            assert "content" not in operation["responses"]["431"], (method, path)


def test_schema_keeps_the_error_answers_a_view_documents(client: Client) -> None:
    errors = _schema(client)["paths"]["/api/v1/auth/token/"]["post"]["responses"]
    assert errors["400"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/InvalidInput"
    }


def test_schema_is_generated_once_for_concurrent_requests(live_server: object) -> None:
    """Eight first requests at once, on the threaded live server: one generation, all 200."""
    SchemaView.clear()
    start = threading.Barrier(8)
    answers: list[tuple[int, str]] = []

    def fetch() -> None:
        start.wait()
        url = f"{live_server}/api/schema/"
        with urllib.request.urlopen(url, timeout=60) as response:  # noqa: S310
            answers.append((response.status, hashlib.sha256(response.read()).hexdigest()))

    threads = [threading.Thread(target=fetch) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(answers) == 8
    assert {status for status, _ in answers} == {200}
    assert len({digest for _, digest in answers}) == 1
