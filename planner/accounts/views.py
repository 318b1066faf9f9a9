"""Accounts: logging in (with the lockout the API's token endpoint has too) and API tokens."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from lib.errors import DomainError
from lib.login_guard import Lockout, LoginLocked, login_authenticate
from planner.accounts import services as tokens
from planner.accounts.forms import OutboxPasswordResetForm


class GuardedAuthenticationForm(AuthenticationForm):
    """Django's login form, logging in through the lockout of :mod:`lib.login_guard`."""

    lockout: Lockout | None = None

    def clean(self) -> dict[str, Any]:
        username = self.cleaned_data.get("username")
        password = self.cleaned_data.get("password")
        if username is not None and password:
            assert self.request is not None  # LoginView passes it
            try:
                self.user_cache = login_authenticate(  # type: ignore[assignment]
                    request=self.request, username=username, password=password
                )
            except LoginLocked as locked:
                self.lockout = locked.lockout
                raise forms.ValidationError(locked.lockout.message, code="locked") from None
            if self.user_cache is None:
                raise self.get_invalid_login_error()
            self.confirm_login_allowed(self.user_cache)
        return self.cleaned_data


class PasswordResetView(auth_views.PasswordResetView):
    """Django's password reset page; its e-mail goes through the notification outbox."""

    form_class = OutboxPasswordResetForm


class LoginView(auth_views.LoginView):
    """The login page; a locked user name or address answers 429 with ``Retry-After``."""

    form_class = GuardedAuthenticationForm

    def form_invalid(self, form: GuardedAuthenticationForm) -> HttpResponse:  # type: ignore[override]
        lockout = form.lockout
        if lockout is None:
            return super().form_invalid(form)
        response = self.render_to_response(
            self.get_context_data(form=form, lockout=lockout), status=429
        )
        for header, value in lockout.headers.items():
            response[header] = value
        return response


@never_cache
@login_required
@require_GET
def token_list(request: HttpRequest) -> HttpResponse:
    return _token_page(request)


@never_cache
@login_required
@require_POST
def token_create(request: HttpRequest) -> HttpResponse:
    """Create a token and show it once, in this answer only (never stored, never redirected)."""
    try:
        instance, token = tokens.api_token_create(user=request.user)
    except DomainError as error:
        messages.error(request, error.message)
        return redirect("planner:token-list")
    return _token_page(request, new_token=token, new_expiry=instance.expiry)


@login_required
@require_POST
def token_revoke(request: HttpRequest, token_id: str) -> HttpResponse:
    token = get_object_or_404(tokens.api_tokens_of(user=request.user), token_key=token_id)
    tokens.api_token_revoke(token=token)
    messages.success(request, f"Token {tokens.api_token_prefix(token)}… revoked.")
    return redirect("planner:token-list")


@login_required
@require_POST
def tokens_revoke_all(request: HttpRequest) -> HttpResponse:
    count = tokens.api_tokens_revoke_all(user=request.user)
    messages.success(request, f"{count} token{'' if count == 1 else 's'} revoked.")
    return redirect("planner:token-list")


def _token_page(request: HttpRequest, **extra: Any) -> HttpResponse:
    rows = [
        {
            "token": token,
            "prefix": tokens.api_token_prefix(token),
            "last_used": tokens.api_token_last_used(token),
        }
        for token in tokens.api_tokens_of(user=request.user)
    ]
    context = {"rows": rows, **extra}
    return render(request, "accounts/tokens.html", context)
