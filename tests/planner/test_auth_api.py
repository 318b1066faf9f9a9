import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


@pytest.fixture
def user() -> User:
    return User.objects.create_user("maya", password="correct horse battery")


def test_token_endpoint_returns_a_token_that_authenticates(user: User) -> None:
    api = APIClient()
    response = api.post(
        "/api/v1/auth/token/", {"username": "maya", "password": "correct horse battery"}
    )
    assert response.status_code == 200
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
    assert APIClient().get("/api/v1/").status_code in (401, 403)


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
    assert "cdn" not in html.lower()
