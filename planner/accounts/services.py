"""API tokens: created for a user, listed, revoked; each expires.

django-rest-knox stores only a token's SHA-512 digest and its first characters (``token_key``,
the lookup key, which we also use as the token's id): the token itself is shown once, when
created. When a token was last used is kept in the cache (no column for it), so it may be
unknown.
"""

from __future__ import annotations

import datetime as dt

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone
from knox.models import AuthToken
from knox.settings import knox_settings

from lib.cacheguard import cache_call
from planner.common.errors import NotAllowed, PlannerError

# A token's last use is written at most once a minute, not on every request.
LAST_USED_RESOLUTION_S = 60
PREFIX_LENGTH = 8  # the characters of a token shown in lists, to tell tokens apart


#: Who holds tokens: a signed-in user (an anonymous one holds none).
TokenOwner = AbstractBaseUser | AnonymousUser


class TokenLimitReached(PlannerError):
    """The user holds as many unexpired tokens as allowed."""

    code = "token_limit_reached"
    kind = "conflict"


def api_tokens_of(*, user: TokenOwner) -> QuerySet[AuthToken]:
    """The user's unexpired tokens, newest first."""
    now = timezone.now()
    return AuthToken.objects.filter(
        Q(expiry__gt=now) | Q(expiry__isnull=True), user_id=user.pk
    ).order_by("-created")


@transaction.atomic
def api_token_create(*, user: TokenOwner) -> tuple[AuthToken, str]:
    """A new token for ``user``, valid ``REST_KNOX["TOKEN_TTL"]``: the row and the token.

    Refused with :class:`TokenLimitReached` at ``REST_KNOX["TOKEN_LIMIT_PER_USER"]``.
    """
    if not isinstance(user, AbstractBaseUser):
        raise NotAllowed("Log in to create an API token.")
    # Lock the user row: two logins at once must not both pass the limit.
    User.objects.select_for_update().filter(pk=user.pk).first()
    AuthToken.objects.filter(user_id=user.pk, expiry__lte=timezone.now()).delete()
    limit = knox_settings.TOKEN_LIMIT_PER_USER
    if limit is not None and api_tokens_of(user=user).count() >= limit:
        raise TokenLimitReached(
            f"You have {limit} API tokens, the most allowed: revoke one first "
            "(on the API tokens page or with DELETE /api/v1/auth/tokens/{id}/)."
        )
    return AuthToken.objects.create(user=user, expiry=knox_settings.TOKEN_TTL)


def api_tokens_expired_delete() -> int:
    """Delete every expired token (hashes that can no longer sign anyone in); how many.
    Run daily by ``celery beat`` (``planner.tokens_expired_delete``)."""
    deleted, _by_model = AuthToken.objects.filter(expiry__lte=timezone.now()).delete()
    return deleted


def api_token_revoke(*, token: AuthToken) -> None:
    token.delete()


def api_tokens_revoke_all(*, user: TokenOwner) -> int:
    """Revoke every token of ``user``; how many there were (expired ones included)."""
    deleted, _ = AuthToken.objects.filter(user_id=user.pk).delete()
    return deleted


def api_token_prefix(token: AuthToken) -> str:
    return token.token_key[:PREFIX_LENGTH]


def api_token_used(token: AuthToken) -> None:
    """Note that ``token`` authenticated a request now (kept until the token expires)."""
    now = timezone.now()
    last = api_token_last_used(token)
    if last is not None and (now - last).total_seconds() < LAST_USED_RESOLUTION_S:
        return
    timeout = (token.expiry - now).total_seconds() if token.expiry else None
    if timeout is not None and timeout <= 0:
        return
    # A convenience, not worth failing or slowing the request for (lib.cacheguard).
    cache_call(
        lambda store: store.set(_last_used_key(token), now.isoformat(), timeout=timeout),
        None,
        what="token last use",
    )


def api_token_last_used(token: AuthToken) -> dt.datetime | None:
    value = cache_call(lambda store: store.get(_last_used_key(token)), None, what="token last use")
    return dt.datetime.fromisoformat(value) if value else None


def _last_used_key(token: AuthToken) -> str:
    return f"api-token-last-used:{token.digest[:64]}"
