"""How the API knows who calls: ``Authorization: Token <token>`` (django-rest-knox).

A module of its own, without views: DRF imports the classes settings name while it defines
``APIView``, so this module must not import ``rest_framework.views`` itself.
"""

from __future__ import annotations

from typing import Any

from knox.auth import TokenAuthentication as KnoxTokenAuthentication
from knox.models import AuthToken
from rest_framework import exceptions

from planner.accounts.services import api_token_used


class TokenAuthentication(KnoxTokenAuthentication):
    """knox's token check, noting when each token was last used; a token that is not text
    is refused (401) rather than failing (500)."""

    def authenticate_credentials(self, token: bytes) -> tuple[Any, AuthToken]:
        try:
            token.decode("utf-8")
        except UnicodeError:
            raise exceptions.AuthenticationFailed("Invalid token.") from None
        user, auth_token = super().authenticate_credentials(token)
        api_token_used(auth_token)
        return user, auth_token
