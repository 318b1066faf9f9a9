"""Demo data for the embedded default: users with known passwords, one per role, each a
member of the demo organisation with that role (ivan is its pricing admin).

Idempotent: running it again resets the demo passwords and adds nothing twice.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import Group, User
from django.db import transaction

from organisations.demo import demo_organisation
from organisations.models import Role
from organisations.services import membership_grant
from planner.common.roles import ALL_ROLES, APPROVER, PRICING_ADMIN, REQUESTER


@dataclass(frozen=True)
class DemoUser:
    username: str
    password: str
    full_name: str
    roles: tuple[str, ...]
    is_staff: bool = False

    @property
    def description(self) -> str:
        return f"{self.username} / {self.password}  ({self.full_name}: {', '.join(self.roles)})"


# Demo credentials are printed by `make run` and documented in the README: not secrets.
DEMO_USERS = (
    DemoUser("maya", "maya-demo-pass", "Maya Lindqvist, ML lead", (REQUESTER,)),
    DemoUser("finn", "finn-demo-pass", "Finn Okafor, finance", (APPROVER,)),
    DemoUser("ivan", "ivan-demo-pass", "Ivan Petrov, infrastructure", (PRICING_ADMIN,), True),
)


@transaction.atomic
def demo_users_load() -> list[DemoUser]:
    groups = {role: Group.objects.get_or_create(name=role)[0] for role in ALL_ROLES}
    for demo in DEMO_USERS:
        first, _, last = demo.full_name.partition(",")[0].partition(" ")
        user, _ = User.objects.get_or_create(username=demo.username)
        user.first_name, user.last_name = first, last
        user.email = f"{demo.username}@example.com"
        user.is_staff = demo.is_staff
        user.set_password(demo.password)
        user.save()
        # The groups carry the admin site's model permissions; the roles are memberships.
        user.groups.set([groups[role] for role in demo.roles])
        _memberships_grant(user, demo.roles)
    return list(DEMO_USERS)


def _memberships_grant(user: User, roles: tuple[str, ...]) -> None:
    organisation = demo_organisation()
    for role in (*roles, Role.VIEWER):
        membership_grant(organisation=organisation, user=user, role=role)
