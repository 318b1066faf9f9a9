"""API tokens: log in for one (``auth/token/``), list and revoke one's own, log out.

Logging in goes through :func:`lib.login_guard.login_authenticate`, as the login page
does: failures are counted per user name and address, and a lockout answers 429 with
``Retry-After``. The token endpoint is also throttled per address (``login`` rate).
"""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object
from drf_spectacular.utils import extend_schema
from knox.models import AuthToken
from knox.settings import knox_settings
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from lib.login_guard import LoginLocked, LoginRateThrottle, login_authenticate
from planner.accounts import services as tokens

TOKEN_TAG = ["auth"]
INVALID_LOGIN = "Unable to log in with provided credentials."


class TokenScheme(OpenApiAuthenticationExtension):
    """The schema's name for our token check: ``Authorization: Token <token>``, as before."""

    target_class = "planner.accounts.authentication.TokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return build_bearer_security_scheme_object(
            header_name="Authorization", token_prefix=knox_settings.AUTH_HEADER_PREFIX
        )


class TokenObtainInput(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(
        max_length=4096, trim_whitespace=False, style={"input_type": "password"}
    )


class TokenObtainOutput(serializers.Serializer):
    token = serializers.CharField(help_text="Send as `Authorization: Token <token>`; shown once.")
    expiry = serializers.DateTimeField(allow_null=True)


class TokenOutput(serializers.Serializer):
    id = serializers.CharField(source="token_key", help_text="Revoke with DELETE on its URL.")
    prefix = serializers.SerializerMethodField(help_text="The token's first characters.")
    created = serializers.DateTimeField()
    expiry = serializers.DateTimeField(allow_null=True)
    last_used = serializers.SerializerMethodField(help_text="Unknown (null) if not recorded.")
    current = serializers.SerializerMethodField(help_text="This request's token.")

    def get_prefix(self, token: AuthToken) -> str:
        return tokens.api_token_prefix(token)

    def get_last_used(self, token: AuthToken) -> str | None:
        used = tokens.api_token_last_used(token)
        return serializers.DateTimeField().to_representation(used) if used else None

    def get_current(self, token: AuthToken) -> bool:
        auth = self.context["request"].auth
        return isinstance(auth, AuthToken) and auth.digest == token.digest


class TokenObtainView(APIView):
    """Log in with a user name and password (JSON or form) for an API token.

    Too many failed logins for the user name (or from the address), or too many attempts
    from the address, answer 429 with ``Retry-After``: the seconds until logins are allowed.
    """

    authentication_classes = ()
    permission_classes = (AllowAny,)
    throttle_classes = (LoginRateThrottle,)

    @extend_schema(
        tags=TOKEN_TAG, request=TokenObtainInput, responses={200: TokenObtainOutput}, auth=[]
    )
    def post(self, request: Request) -> Response:
        serializer = TokenObtainInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            user = login_authenticate(request=request, **serializer.validated_data)
        except LoginLocked as locked:
            body = {"detail": locked.lockout.message, "code": "login_locked"}
            return Response(
                body, status=status.HTTP_429_TOO_MANY_REQUESTS, headers=locked.lockout.headers
            )
        if user is None:
            raise serializers.ValidationError({"non_field_errors": [INVALID_LOGIN]})
        instance, token = tokens.api_token_create(user=user)
        return Response(TokenObtainOutput({"token": token, "expiry": instance.expiry}).data)


class TokenListView(APIView):
    """The caller's unexpired API tokens, newest first (never the tokens themselves)."""

    @extend_schema(tags=TOKEN_TAG, responses={200: TokenOutput(many=True)})
    def get(self, request: Request) -> Response:
        rows = tokens.api_tokens_of(user=request.user)
        return Response(TokenOutput(rows, many=True, context={"request": request}).data)


class TokenDetailView(APIView):
    """One of the caller's API tokens, by its id."""

    @extend_schema(tags=TOKEN_TAG, responses={204: None})
    def delete(self, request: Request, token_id: str) -> Response:
        """Revoke the token: requests carrying it answer 401 from now on."""
        token = get_object_or_404(tokens.api_tokens_of(user=request.user), token_key=token_id)
        tokens.api_token_revoke(token=token)
        return Response(status=status.HTTP_204_NO_CONTENT)


class LogoutView(APIView):
    """Revoke the token this request carries."""

    @extend_schema(tags=TOKEN_TAG, request=None, responses={204: None})
    def post(self, request: Request) -> Response:
        if not isinstance(request.auth, AuthToken):
            raise serializers.ValidationError(
                {"non_field_errors": ["This request carries no API token to revoke."]}
            )
        tokens.api_token_revoke(token=request.auth)
        return Response(status=status.HTTP_204_NO_CONTENT)


class LogoutAllView(APIView):
    """Revoke every API token of the caller, this request's included."""

    @extend_schema(tags=TOKEN_TAG, request=None, responses={204: None})
    def post(self, request: Request) -> Response:
        tokens.api_tokens_revoke_all(user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)
