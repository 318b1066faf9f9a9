"""Grant a user a role in an organisation, creating either when missing (idempotent)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from lib.errors import DomainError
from organisations.models import Role
from organisations.services import member_add


class Command(BaseCommand):
    help = (
        "Give USERNAME the ROLE in ORGANISATION, creating the organisation and the user when "
        f"missing; running it again changes nothing. Roles: {', '.join(Role.values)}."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("organisation", help="the organisation's name")
        parser.add_argument("username")
        parser.add_argument("role", help=f"one of {', '.join(Role.values)}")
        parser.add_argument(
            "--password", help="set the user's password (a new user without one cannot log in)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["role"] not in Role.values:
            raise CommandError(
                f"ROLE: unknown role {options['role']!r}; use one of {', '.join(Role.values)}"
            )
        try:
            added = member_add(
                organisation_name=options["organisation"],
                username=options["username"],
                role=options["role"],
                password=options["password"],
            )
        except DomainError as error:
            argument = (error.field or "").upper()
            message = f"{argument}: {error.message}" if argument else error.message
            raise CommandError(message) from None
        membership = added.membership
        news = {"organisation": added.organisation_created, "user": added.user_created}
        created = [what for what, new in news.items() if new]
        note = f" (created the {' and the '.join(created)})" if created else ""
        self.stdout.write(self.style.SUCCESS(f"{membership}{note}."))
