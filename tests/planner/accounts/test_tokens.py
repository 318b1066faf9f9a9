"""API tokens: stored hashed, expiring, limited per user, listed and revoked through the API
and the tokens page."""

import datetime as dt
from collections.abc import Iterator

import pytest
import yaml
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from knox.models import AuthToken
from pytest_django.fixtures import Settings
from rest_framework.test import APIClient

from lib.login_guard import login_lockout_lift
from planner.tasks import tokens_expired_delete

pytestmark = pytest.mark.django_db

TOKEN_URL = "/api/v1/auth/token/"
TOKENS_URL = "/api/v1/auth/tokens/"
PAGE_URL = "/accounts/tokens/"
PASSWORD = "correct horse battery"


@pytest.fixture(autouse=True)
def fresh_counters() -> Iterator[None]:
    login_lockout_lift(address="127.0.0.1", username="maya")
    yield
    login_lockout_lift(address="127.0.0.1", username="maya")


@pytest.fixture
def maya() -> User:
    return User.objects.create_user("maya", password=PASSWORD)


@pytest.fixture
def rosa() -> User:
    return User.objects.create_user("rosa", password=PASSWORD)


def _new_token(username: str = "maya") -> str:
    response = APIClient().post(TOKEN_URL, {"username": username, "password": PASSWORD})
    assert response.status_code == 200, response.content
    return str(response.json()["token"])


def _as(token: str) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return api


# --- Logging in for a token ----------------------------------------------------------------


def test_a_token_is_stored_hashed_and_expires_after_the_ttl(maya: User) -> None:
    before = timezone.now()
    response = APIClient().post(TOKEN_URL, {"username": "maya", "password": PASSWORD})
    body = response.json()
    assert set(body) == {"token", "expiry"}
    stored = AuthToken.objects.get(user=maya)
    assert body["token"] not in {stored.digest, stored.token_key}
    assert len(stored.digest) == 128  # SHA-512
    assert stored.expiry is not None
    assert dt.timedelta(hours=719) < stored.expiry - before < dt.timedelta(hours=721)
    assert dt.datetime.fromisoformat(body["expiry"]) == stored.expiry


def test_the_token_endpoint_takes_a_form_too(maya: User) -> None:
    response = APIClient().post(
        TOKEN_URL, {"username": "maya", "password": PASSWORD}, format="multipart"
    )
    assert response.status_code == 200
    assert _as(response.json()["token"]).get("/api/v1/").status_code == 200


def test_the_ttl_comes_from_settings(maya: User, settings: Settings) -> None:
    settings.REST_KNOX = {**settings.REST_KNOX, "TOKEN_TTL": dt.timedelta(hours=2)}
    _new_token()
    expiry = AuthToken.objects.get(user=maya).expiry
    assert expiry is not None
    assert expiry - timezone.now() < dt.timedelta(hours=2)


def test_an_expired_token_is_refused(maya: User) -> None:
    token = _new_token()
    AuthToken.objects.filter(user=maya).update(expiry=timezone.now() - dt.timedelta(seconds=1))
    response = _as(token).get("/api/v1/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"


def test_a_token_that_is_not_text_is_401(maya: User) -> None:
    response = APIClient().get("/api/v1/", HTTP_AUTHORIZATION="Token \xff\xfe")
    assert response.status_code == 401


def test_a_user_holds_at_most_the_token_limit(maya: User, settings: Settings) -> None:
    settings.REST_KNOX = {**settings.REST_KNOX, "TOKEN_LIMIT_PER_USER": 2}
    _new_token()
    _new_token()
    response = APIClient().post(TOKEN_URL, {"username": "maya", "password": PASSWORD})
    assert response.status_code == 409
    assert response.json()["code"] == "token_limit_reached"
    assert "revoke one first" in response.json()["detail"]


def test_expired_tokens_do_not_count_against_the_limit(maya: User, settings: Settings) -> None:
    settings.REST_KNOX = {**settings.REST_KNOX, "TOKEN_LIMIT_PER_USER": 1}
    _new_token()
    AuthToken.objects.filter(user=maya).update(expiry=timezone.now() - dt.timedelta(seconds=1))
    _new_token()
    assert AuthToken.objects.filter(user=maya).count() == 1


# --- Listing and revoking through the API ------------------------------------------------


def test_the_list_shows_ones_own_tokens_without_the_tokens(maya: User, rosa: User) -> None:
    first, second = _new_token(), _new_token()
    _new_token("rosa")
    response = _as(second).get(TOKENS_URL)
    assert response.status_code == 200
    rows = response.json()
    assert [row["prefix"] for row in rows] == [second[:8], first[:8]]
    assert [row["current"] for row in rows] == [True, False]
    assert set(rows[0]) == {"id", "prefix", "created", "expiry", "last_used", "current"}
    assert first not in response.content.decode()
    assert second not in response.content.decode()


def test_the_list_says_when_a_token_was_last_used(maya: User) -> None:
    token = _new_token()
    unused = _new_token()
    rows = {row["prefix"]: row for row in _as(token).get(TOKENS_URL).json()}
    assert rows[token[:8]]["last_used"] is not None
    assert rows[unused[:8]]["last_used"] is None


def test_revoking_a_token_makes_it_401(maya: User) -> None:
    keep, revoke = _new_token(), _new_token()
    ids = {row["prefix"]: row["id"] for row in _as(keep).get(TOKENS_URL).json()}
    response = _as(keep).delete(f"{TOKENS_URL}{ids[revoke[:8]]}/")
    assert response.status_code == 204
    assert _as(revoke).get("/api/v1/").status_code == 401
    assert _as(keep).get("/api/v1/").status_code == 200


def test_another_users_token_is_not_found(maya: User, rosa: User) -> None:
    mayas = _new_token()
    rosas = _new_token("rosa")
    rosas_id = AuthToken.objects.get(user=rosa).token_key
    response = _as(mayas).delete(f"{TOKENS_URL}{rosas_id}/")
    assert response.status_code == 404
    assert _as(rosas).get("/api/v1/").status_code == 200


def test_logout_revokes_this_requests_token(maya: User) -> None:
    token, other = _new_token(), _new_token()
    assert _as(token).post("/api/v1/auth/logout/").status_code == 204
    assert _as(token).get("/api/v1/").status_code == 401
    assert _as(other).get("/api/v1/").status_code == 200


def test_logout_with_a_session_has_no_token_to_revoke(maya: User) -> None:
    api = APIClient()
    api.force_login(maya)
    assert api.post("/api/v1/auth/logout/").status_code == 400


def test_logout_all_revokes_every_token_of_the_user(maya: User, rosa: User) -> None:
    token, other = _new_token(), _new_token()
    rosas = _new_token("rosa")
    assert _as(token).post("/api/v1/auth/logout-all/").status_code == 204
    assert _as(token).get("/api/v1/").status_code == 401
    assert _as(other).get("/api/v1/").status_code == 401
    assert _as(rosas).get("/api/v1/").status_code == 200


def test_token_endpoints_need_authentication() -> None:
    response = APIClient().get(TOKENS_URL)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"


def test_the_schema_documents_the_token_endpoints(client: Client) -> None:
    schema = yaml.safe_load(client.get("/api/schema/").content)
    paths = schema["paths"]
    assert "get" in paths["/api/v1/auth/tokens/"]
    assert "delete" in paths["/api/v1/auth/tokens/{token_id}/"]
    assert "post" in paths["/api/v1/auth/logout/"]
    assert "post" in paths["/api/v1/auth/logout-all/"]
    obtain = paths["/api/v1/auth/token/"]["post"]
    assert set(obtain["responses"]["200"]["content"]["application/json"]["schema"].values()) == {
        "#/components/schemas/TokenObtainOutput"
    }
    assert schema["components"]["securitySchemes"]["tokenAuth"]["in"] == "header"


# --- The tokens page ---------------------------------------------------------------------


@pytest.fixture
def page(maya: User) -> Client:
    client = Client()
    client.force_login(maya)
    return client


def test_the_tokens_page_needs_a_login() -> None:
    response = Client().get(PAGE_URL)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_the_tokens_page_lists_prefixes_never_tokens(page: Client) -> None:
    token = _new_token()
    html = page.get(PAGE_URL).content.decode()
    assert f"{token[:8]}…" in html
    assert token not in html
    assert "unknown" in html  # never used


def test_a_token_created_on_the_page_is_shown_once(page: Client, maya: User) -> None:
    response = page.post("/accounts/tokens/new/")
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    token = response.context["new_token"]
    assert token in response.content.decode()
    assert _as(token).get("/api/v1/").status_code == 200
    again = page.get(PAGE_URL).content.decode()
    assert token not in again
    assert f"{token[:8]}…" in again


def test_the_page_says_when_the_limit_is_reached(page: Client, settings: Settings) -> None:
    settings.REST_KNOX = {**settings.REST_KNOX, "TOKEN_LIMIT_PER_USER": 1}
    page.post("/accounts/tokens/new/")
    response = page.post("/accounts/tokens/new/", follow=True)
    assert "revoke one first" in response.content.decode()
    assert AuthToken.objects.count() == 1


def test_revoking_on_the_page(page: Client) -> None:
    token, keep = _new_token(), _new_token()
    key = token[:15]
    response = page.post(f"/accounts/tokens/{key}/revoke/", follow=True)
    assert f"Token {token[:8]}… revoked." in response.content.decode()
    assert _as(token).get("/api/v1/").status_code == 401
    assert _as(keep).get("/api/v1/").status_code == 200


def test_revoking_all_on_the_page(page: Client) -> None:
    tokens = [_new_token(), _new_token()]
    response = page.post("/accounts/tokens/revoke-all/", follow=True)
    assert "2 tokens revoked." in response.content.decode()
    assert [_as(token).get("/api/v1/").status_code for token in tokens] == [401, 401]


def test_the_page_cannot_revoke_another_users_token(page: Client, rosa: User) -> None:
    rosas = _new_token("rosa")
    assert page.post(f"/accounts/tokens/{rosas[:15]}/revoke/").status_code == 404
    assert page.get(f"/accounts/tokens/{rosas[:15]}/revoke/").status_code == 405
    assert _as(rosas).get("/api/v1/").status_code == 200


def test_the_user_menu_links_the_tokens_page(page: Client) -> None:
    html = page.get("/").content.decode()
    assert 'href="/accounts/tokens/"' in html


def test_the_daily_sweep_deletes_expired_tokens_only(maya: User, rosa: User) -> None:
    expired, _ = AuthToken.objects.create(user=maya, expiry=dt.timedelta(hours=1))
    AuthToken.objects.filter(pk=expired.pk).update(expiry=timezone.now() - dt.timedelta(seconds=1))
    live, _ = AuthToken.objects.create(user=rosa, expiry=dt.timedelta(hours=1))
    assert tokens_expired_delete() == 1  # the beat task, run here
    assert list(AuthToken.objects.values_list("pk", flat=True)) == [live.pk]
    assert settings.CELERY_BEAT_SCHEDULE["tokens-expired-delete"]["task"] == (
        "planner.tokens_expired_delete"
    )
