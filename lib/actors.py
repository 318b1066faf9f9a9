"""Who asks for a write: a signed-in user, an anonymous one, or nobody (a command, demo data)."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User

#: The user behind a request; services check roles on it and record it as the author.
Actor = User | AnonymousUser
#: As ``Actor``, or ``None`` where a management command or the demo loader writes.
OptionalActor = User | AnonymousUser | None


def actor_user(actor: OptionalActor) -> User | None:
    """The user to record as author of a write: None for anonymous actors and scripts."""
    return actor if isinstance(actor, User) else None
