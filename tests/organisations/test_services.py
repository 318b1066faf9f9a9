"""The role check every service makes, and how its refusal reads."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from organisations.errors import NotAllowed
from organisations.models import Role
from organisations.services import membership_grant, organisation_create, role_assert

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("roles", "message"),
    [
        ([Role.APPROVER], "Only an approver of Initech may decide."),
        ([Role.REQUESTER], "Only a requester of Initech may decide."),
        ([Role.PRICING_ADMIN, Role.APPROVER], "Only an approver or pricing admin of Initech"),
    ],
)
def test_a_refusal_names_the_role_with_its_article(roles: list[Role], message: str) -> None:
    organisation = organisation_create(name="Initech")
    viewer = User.objects.create_user("peter")
    membership_grant(organisation=organisation, user=viewer, role=Role.VIEWER)
    with pytest.raises(NotAllowed) as refused:
        role_assert(viewer, organisation, roles, action="decide")
    assert str(refused.value).startswith(message)
