"""The planner's models: budget requests and capacity plans, and every room's models.

Django loads an app's models from this module, so it imports each room's (a model defined in
``planner.scenarios.models`` still belongs to the app ``planner``); ``from planner.models
import Scenario`` keeps working, though each room's own module is the place to import from.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse

from lib.appendonly import AppendOnlyModel
from lib.money import MONEY_DIGITS, MONEY_PLACES
from organisations.models import Membership as Membership
from organisations.models import Organisation as Organisation
from organisations.models import Role as Role
from planner.scenarios.models import (
    Comparison,
    EstimationRun,
    PriceSource,
    Project,
    RunState,
    RunStatus,
    Scenario,
)

# --- Budget requests and approvals ----------------------------------------------------------


class BudgetState(models.TextChoices):
    DRAFT = "draft", "Draft"
    SUBMITTED = "submitted", "Submitted"
    CHANGES_REQUESTED = "changes_requested", "Changes requested"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"
    CLOSED = "closed", "Closed"
    SUPERSEDED = "superseded", "Superseded"


class StateChangeRefused(Exception):
    """The state of a budget request was about to change outside a transition service."""


class BudgetRequestQuerySet(models.QuerySet["BudgetRequest"]):
    def update(self, **kwargs: object) -> int:
        if "state" in kwargs:
            raise StateChangeRefused(
                "a budget request's state changes only through planner.services.budgets"
            )
        return super().update(**kwargs)


class BudgetRequest(models.Model):
    """A request for a training budget, carried to finance sign-off.

    ``state`` is protected: it is set only by the transition functions of
    :mod:`planner.services.budgets`, which hold :data:`TRANSITION_TOKEN` while saving. A plain
    ``save()`` that changes it, or a queryset ``update(state=...)``, raises
    :class:`StateChangeRefused`; the admin and the API show it read-only.
    """

    class Basis(models.TextChoices):
        P50_CONTINGENCY = "p50_contingency", "P50 plus contingency"
        P90 = "p90", "P90"

    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="budget_requests")
    run = models.ForeignKey(EstimationRun, on_delete=models.PROTECT, related_name="budget_requests")
    alternatives = models.ManyToManyField(
        EstimationRun, blank=True, related_name="compared_in_requests"
    )
    title = models.CharField(max_length=200)
    basis = models.CharField(max_length=20, choices=Basis.choices, default=Basis.P50_CONTINGENCY)
    amount = models.DecimalField(max_digits=MONEY_DIGITS, decimal_places=MONEY_PLACES)
    contingency = models.DecimalField(max_digits=MONEY_DIGITS, decimal_places=MONEY_PLACES)
    currency = models.CharField(max_length=3)
    justification = models.TextField()
    override_reason = models.TextField(
        blank=True,
        help_text="Why the budget is requested although its run has a blocking warning "
        "(it does not fit in memory)",
    )
    state = models.CharField(
        max_length=20, choices=BudgetState.choices, default=BudgetState.DRAFT, editable=False
    )
    approvals_required = models.PositiveSmallIntegerField(default=1, editable=False)
    snapshot = models.JSONField(null=True, blank=True, editable=False)
    snapshot_sha256 = models.CharField(max_length=64, blank=True, editable=False)
    supersedes = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="superseded_by"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="budget_requests"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    submitted_at = models.DateTimeField(null=True, blank=True, editable=False)
    decided_at = models.DateTimeField(null=True, blank=True, editable=False)

    objects = BudgetRequestQuerySet.as_manager()

    class Meta:
        ordering = ["-updated_at"]
        constraints = [
            models.CheckConstraint(condition=Q(amount__gt=0), name="budget_amount_positive"),
        ]

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self._loaded_state = self.state if self.pk else None
        self._transition_token: object | None = None

    def __str__(self) -> str:
        return f"{self.title} ({self.get_state_display()})"

    def save(self, *args: object, **kwargs: object) -> None:
        # An integrity guard, not a business rule: the rules live in the transitions.
        changed = self._loaded_state is not None and self.state != self._loaded_state
        created_in_other_state = self._loaded_state is None and self.state != BudgetState.DRAFT
        if (changed or created_in_other_state) and self._transition_token is not TRANSITION_TOKEN:
            raise StateChangeRefused(
                "a budget request's state changes only through planner.services.budgets"
            )
        super().save(*args, **kwargs)  # type: ignore[arg-type]
        self._loaded_state = self.state

    def get_absolute_url(self) -> str:
        return reverse("planner:budget-detail", args=[self.pk])

    def refresh_from_db(self, *args: object, **kwargs: object) -> None:
        super().refresh_from_db(*args, **kwargs)  # type: ignore[arg-type]
        self._loaded_state = self.state

    @property
    def is_frozen(self) -> bool:
        """Submitted or later: the inputs are in the snapshot and nothing may edit them."""
        return self.state not in (BudgetState.DRAFT, BudgetState.CHANGES_REQUESTED)


#: Held by the transition services while they save a new state.
TRANSITION_TOKEN = object()


class BudgetDecision(models.Model):
    """One approver's decision on one submission of a request (append-only)."""

    class Decision(models.TextChoices):
        APPROVE = "approve", "Approved"
        REJECT = "reject", "Rejected"
        REQUEST_CHANGES = "request_changes", "Changes requested"

    request = models.ForeignKey(BudgetRequest, on_delete=models.PROTECT, related_name="decisions")
    submission = models.PositiveIntegerField(help_text="Which submission of the request, from 1")
    approver = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    decision = models.CharField(max_length=20, choices=Decision.choices)
    comment = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["request", "submission", "approver"], name="one_decision_per_approver"
            )
        ]

    def __str__(self) -> str:
        return f"{self.approver} {self.get_decision_display().lower()} submission {self.submission}"


class AuditEvent(AppendOnlyModel):
    """Who did what to a budget request or its scenario, when, and why (append-only)."""

    append_only_error = StateChangeRefused

    request = models.ForeignKey(
        BudgetRequest, null=True, on_delete=models.PROTECT, related_name="audit_events"
    )
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="audit_events")
    scenario = models.ForeignKey(
        Scenario, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_events"
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.PROTECT, related_name="+"
    )
    action = models.CharField(max_length=40)
    from_state = models.CharField(max_length=20, blank=True)
    to_state = models.CharField(max_length=20, blank=True)
    changes = models.JSONField(default=dict, blank=True)
    comment = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.actor}: {self.action}"


# --- Outbox ----------------------------------------------------------------------------------


class NotificationStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    SENT = "sent", "Sent"
    FAILED = "failed", "Failed"


class Notification(models.Model):
    """An e-mail written in the transaction of the change it announces (an outbox row).

    A Celery task sends it after the commit; when the broker was down, the dispatcher
    (``planner.dispatch_pending``, run by ``celery beat``) sends what ``dispatched_at`` says
    never reached it.
    """

    subject = models.CharField(max_length=255)
    body = models.TextField()
    recipients = models.JSONField(default=list)
    status = models.CharField(
        max_length=10, choices=NotificationStatus.choices, default=NotificationStatus.PENDING
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    error = models.TextField(blank=True, help_text="Why the last attempt failed")
    created_at = models.DateTimeField(auto_now_add=True)
    dispatched_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "pk"]
        indexes = [
            models.Index(
                fields=["dispatched_at"],
                name="notification_pending",
                condition=Q(status="pending"),
            )
        ]

    def __str__(self) -> str:
        return f"{self.subject} ({self.status})"


class PlanStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


PLAN_FINISHED = (PlanStatus.SUCCEEDED, PlanStatus.FAILED, PlanStatus.CANCELLED)


class CapacityPlan(models.Model):
    """A saved capacity plan: which clusters train a model by a deadline within a budget.

    Its inputs, the scenario searched and the priced options are frozen when it is made (a
    re-run makes a new plan with today's prices). The workers search it in chunks
    (:class:`CapacityPlanChunk`), and a final task merges them into ``result``.
    """

    organisation = models.ForeignKey(
        Organisation, on_delete=models.CASCADE, related_name="capacity_plans"
    )
    project = models.ForeignKey(
        Project, null=True, blank=True, on_delete=models.SET_NULL, related_name="capacity_plans"
    )
    name = models.CharField(max_length=200)
    inputs = models.JSONField(help_text="The question as asked: model, tokens, deadline, ...")
    scenario = models.JSONField(help_text="The model and training searched (estimator format)")
    options = models.JSONField(help_text="The priced options, frozen: prices, rates, terms")
    skipped = models.JSONField(default=list, help_text="Prices left out, and why")
    deadline = models.DateField()
    deadline_days = models.PositiveIntegerField(
        help_text="Days from the plan's day to the deadline"
    )
    budget = models.DecimalField(
        max_digits=MONEY_DIGITS, decimal_places=MONEY_PLACES, null=True, blank=True
    )
    currency = models.CharField(max_length=3)
    status = models.CharField(max_length=12, choices=PlanStatus.choices, default=PlanStatus.QUEUED)
    progress = models.FloatField(default=0.0, help_text="0..1: the share of chunks searched")
    chunks_total = models.PositiveIntegerField(default=0)
    result = models.JSONField(null=True, blank=True, help_text="Feasible options and frontier")
    estimator_version = models.CharField(max_length=20, blank=True)
    error = models.TextField(blank=True)
    rerun_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="reruns"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    merge_sent_at = models.DateTimeField(
        null=True, blank=True, help_text="When the merge task was sent (every chunk done)"
    )
    finished_at = models.DateTimeField(null=True, blank=True)
    cancelled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(progress__gte=0) & Q(progress__lte=1), name="plan_progress_0_1"
            )
        ]

    def __str__(self) -> str:
        return f"Capacity plan {self.pk}: {self.name}"

    def get_absolute_url(self) -> str:
        return reverse("planner:capacity-plan-detail", args=[self.pk])

    @property
    def is_finished(self) -> bool:
        return self.status in PLAN_FINISHED


class ChunkStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


class CapacityPlanChunk(models.Model):
    """One task's share of a plan: one accelerator's search over a few cluster sizes.

    Like a run, the row is its own outbox (``dispatched_at``) and only the task whose id it
    holds may run it; a done chunk is never searched again, so a redelivered task is harmless.
    """

    plan = models.ForeignKey(CapacityPlan, on_delete=models.CASCADE, related_name="chunks")
    index = models.PositiveIntegerField()
    work = models.JSONField(help_text="accelerator, capacity and cluster sizes to search")
    status = models.CharField(
        max_length=12, choices=ChunkStatus.choices, default=ChunkStatus.QUEUED
    )
    result = models.JSONField(null=True, blank=True, help_text="Points found and misses")
    attempts = models.PositiveSmallIntegerField(default=0)
    task_id = models.CharField(max_length=64, blank=True)
    worker = models.CharField(max_length=200, blank=True, help_text="Who searched it")
    dispatched_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["plan", "index"]
        constraints = [
            models.UniqueConstraint(fields=["plan", "index"], name="plan_chunk_index_unique")
        ]
        indexes = [
            models.Index(
                fields=["status", "dispatched_at"],
                name="chunk_unfinished",
                condition=Q(status__in=["queued", "running"]),
            )
        ]

    def __str__(self) -> str:
        return f"Chunk {self.index} of plan {self.plan_id} ({self.status})"


__all__ = [
    "PLAN_FINISHED",
    "TRANSITION_TOKEN",
    "AuditEvent",
    "BudgetDecision",
    "BudgetRequest",
    "BudgetRequestQuerySet",
    "BudgetState",
    "CapacityPlan",
    "CapacityPlanChunk",
    "ChunkStatus",
    "Comparison",
    "EstimationRun",
    "Membership",
    "Notification",
    "NotificationStatus",
    "Organisation",
    "PlanStatus",
    "PriceSource",
    "Project",
    "Role",
    "RunState",
    "RunStatus",
    "Scenario",
    "StateChangeRefused",
]
