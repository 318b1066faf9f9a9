"""Admin for the planner: organisations and memberships are managed here; projects,
scenarios, runs and comparisons are shown read-only, since their writes carry rules
(role checks, scenario validation, frozen run inputs) that live in the rooms' services.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from organisations.models import Membership, Organisation
from planner.budgets.models import AuditEvent, BudgetRequest
from planner.scenarios.models import Comparison, EstimationRun, Project, Scenario


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Organisation)
class OrganisationAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "base_currency", "created_at"]
    search_fields = ["name"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "organisation", "role", "created_at"]
    list_filter = ["organisation", "role"]
    autocomplete_fields = ["user"]


class ReadOnlyAdmin(admin.ModelAdmin):
    """Shown for inspection; changed through the pages and the API, which call services."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Project)
class ProjectAdmin(ReadOnlyAdmin):
    list_display = ["name", "organisation", "owner", "deadline", "budget_ceiling", "currency"]
    list_filter = ["organisation"]
    search_fields = ["name"]


@admin.register(Scenario)
class ScenarioAdmin(ReadOnlyAdmin):
    list_display = ["name", "project", "price_source", "updated_at"]
    list_filter = ["price_source", "project__organisation"]
    search_fields = ["name", "project__name"]


@admin.register(EstimationRun)
class EstimationRunAdmin(ReadOnlyAdmin):
    list_display = ["pk", "scenario", "status", "progress", "attempts", "created_at"]
    list_filter = ["status"]


@admin.register(Comparison)
class ComparisonAdmin(ReadOnlyAdmin):
    list_display = ["name", "project", "created_at"]


class AuditEventInline(admin.TabularInline):
    model = AuditEvent
    extra = 0
    can_delete = False
    fields = ("created_at", "actor", "action", "from_state", "to_state", "changes", "comment")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(BudgetRequest)
class BudgetRequestAdmin(ReadOnlyAdmin):
    """Read-only: the state moves only through the transition services (pages and API)."""

    list_display = ["title", "project", "state", "amount", "currency", "created_by", "updated_at"]
    list_filter = ["state", "project__organisation"]
    search_fields = ["title", "project__name", "snapshot_sha256"]
    inlines = [AuditEventInline]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "actor", "action", "from_state", "to_state", "project"]
    list_filter = ["action"]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
