"""``manage.py add_member``: grant a role, creating the organisation and the user."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from organisations.models import Membership, Organisation, Role
from organisations.selectors import user_roles


def _add_member(*args: str) -> str:
    out = StringIO()
    call_command("add_member", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_add_member_creates_the_organisation_and_the_user_and_grants_the_role() -> None:
    output = _add_member("Initech", "peter", "pricing_admin", "--password", "tps-report-1")
    assert "created the organisation and the user" in output
    user = User.objects.get(username="peter")
    organisation = Organisation.objects.get(name="Initech")
    assert user.check_password("tps-report-1")
    assert user_roles(user, organisation) == {Role.PRICING_ADMIN}


@pytest.mark.django_db
def test_add_member_is_idempotent_and_adds_roles() -> None:
    _add_member("Initech", "peter", "requester")
    second = _add_member("Initech", "peter", "requester")
    assert "created" not in second
    _add_member("Initech", "peter", "viewer")
    assert Membership.objects.filter(user__username="peter").count() == 2
    assert Organisation.objects.filter(name="Initech").count() == 1
    assert not User.objects.get(username="peter").has_usable_password()


@pytest.mark.django_db
def test_add_member_names_the_argument_of_an_unknown_role() -> None:
    with pytest.raises(CommandError, match=r"ROLE: unknown role 'emperor'.*pricing_admin"):
        _add_member("Initech", "peter", "emperor")
    assert not Organisation.objects.filter(name="Initech").exists()
    assert not User.objects.filter(username="peter").exists()
