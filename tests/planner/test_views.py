import pytest
from django.test import Client

from planner.demo import DEMO_USERS, demo_users_load
from planner.roles import APPROVER, REQUESTER, user_has_role

pytestmark = pytest.mark.django_db


def test_home_page_offers_login_to_anonymous_visitors(client: Client) -> None:
    response = client.get("/")
    assert response.status_code == 200
    assert b"Log in" in response.content


def test_demo_users_log_in_with_the_printed_passwords(client: Client) -> None:
    demo_users_load()
    for demo in DEMO_USERS:
        response = client.post(
            "/accounts/login/", {"username": demo.username, "password": demo.password}
        )
        assert response.status_code == 302, demo.username
        assert client.get("/").context["user"].username == demo.username
        client.post("/accounts/logout/")


def test_demo_load_is_idempotent_and_assigns_roles() -> None:
    demo_users_load()
    demo_users_load()
    from django.contrib.auth.models import User

    assert User.objects.filter(username__in=[d.username for d in DEMO_USERS]).count() == len(
        DEMO_USERS
    )
    requester = User.objects.get(username="maya")
    assert user_has_role(requester, REQUESTER)
    assert not user_has_role(requester, APPROVER)


def test_wrong_password_shows_an_error(client: Client) -> None:
    demo_users_load()
    response = client.post("/accounts/login/", {"username": "maya", "password": "wrong"})
    assert response.status_code == 200
    assert b"didn't match" in response.content
