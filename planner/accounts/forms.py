"""Account forms: the password reset whose e-mail goes through the notification outbox."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.forms import PasswordResetForm
from django.template import loader

from planner.budgets.notifications import notification_queue


class OutboxPasswordResetForm(PasswordResetForm):
    """Django's password reset form, its e-mail written to the notification outbox instead
    of sent inside the request: a mail server that refuses or stalls neither drops the mail
    nor holds the page; a worker sends it, retrying as any notification
    (:mod:`planner.budgets.notifications`)."""

    def send_mail(
        self,
        subject_template_name: str,
        email_template_name: str,
        context: dict[str, Any],
        from_email: str | None,
        to_email: str,
        html_email_template_name: str | None = None,
    ) -> None:
        subject = "".join(loader.render_to_string(subject_template_name, context).splitlines())
        body = loader.render_to_string(email_template_name, context)
        notification_queue(subject, body, [to_email])
