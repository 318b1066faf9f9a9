"""Organisations, their members and the roles members hold.

The tables keep the names they had when the planner held these models (``planner_*``):
migration ``organisations.0001`` took them over without touching the database.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from lib.money import MONEY_DIGITS, MONEY_PLACES


class Role(models.TextChoices):
    REQUESTER = "requester", "Requester"
    APPROVER = "approver", "Approver"
    PRICING_ADMIN = "pricing_admin", "Pricing admin"
    VIEWER = "viewer", "Viewer"


class Organisation(models.Model):
    name = models.CharField(max_length=200, unique=True)
    slug = models.SlugField(max_length=60, unique=True)
    base_currency = models.CharField(
        max_length=3, default="USD", help_text="Currency that comparisons convert into"
    )
    two_approvals_above = models.DecimalField(
        max_digits=MONEY_DIGITS,
        decimal_places=MONEY_PLACES,
        null=True,
        blank=True,
        help_text="Budget requests above this amount (base currency) need two approvers",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "planner_organisation"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    """A user's role in an organisation; a user may hold several roles there."""

    organisation = models.ForeignKey(
        Organisation, on_delete=models.CASCADE, related_name="memberships"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=20, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "planner_membership"
        ordering = ["organisation__name", "user__username", "role"]
        constraints = [
            models.UniqueConstraint(
                fields=["organisation", "user", "role"], name="membership_unique_role"
            )
        ]

    def __str__(self) -> str:
        return f"{self.user} is {self.get_role_display()} in {self.organisation}"
