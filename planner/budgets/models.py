"""Budget requests and their decisions, the audit trail, and the notifications outbox."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse

from lib.appendonly import AppendOnlyModel
from lib.jobs import Job, Outbox
from lib.money import MONEY_DIGITS, MONEY_PLACES
from planner.scenarios.models import (
    EstimationRun,
    Project,
    Scenario,
)


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
                "a budget request's state changes only through planner.budgets.services"
            )
        return super().update(**kwargs)


class BudgetRequest(models.Model):
    """A request for a training budget, carried to finance sign-off.

    ``state`` is protected: it is set only by the transition functions of
    :mod:`planner.budgets.services`, which hold :data:`TRANSITION_TOKEN` while saving. A plain
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
                "a budget request's state changes only through planner.budgets.services"
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


class NotificationStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    SENT = "sent", "Sent"
    FAILED = "failed", "Failed"


class Notification(Outbox):
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
    next_attempt_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the next try is due (after a refusal), or until when a worker holds "
        "the try in progress; empty: due now",
    )
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


class PackStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Rendering"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class SignoffPack(Job):
    """A frozen request's sign-off pack (PDF and XLSX) as rendered once by a worker, and the
    job that renders it (:mod:`planner.budgets.packs`).

    ``edition`` names what the files show: the snapshot (``snapshot_sha256``), the renderer's
    version, the trail of decisions and the warnings arisen since submission; a download
    serves the files while the request's edition is still this one.
    """

    request = models.OneToOneField(
        BudgetRequest, on_delete=models.CASCADE, related_name="signoff_pack"
    )
    status = models.CharField(max_length=10, choices=PackStatus.choices, default=PackStatus.QUEUED)
    attempts = models.PositiveSmallIntegerField(default=0)
    task_id = models.CharField(max_length=64, blank=True)
    dispatched_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    edition = models.CharField(max_length=64, blank=True, help_text="What the stored files show")
    snapshot_sha256 = models.CharField(
        max_length=64, blank=True, help_text="The snapshot the stored files were rendered from"
    )
    renderer_version = models.PositiveSmallIntegerField(default=0)
    pdf = models.BinaryField(null=True, blank=True)
    xlsx = models.BinaryField(null=True, blank=True)
    rendered_at = models.DateTimeField(null=True, blank=True)
    render_seconds = models.FloatField(null=True, blank=True)
    renders = models.PositiveIntegerField(default=0, help_text="How many times it was rendered")
    error = models.TextField(blank=True, help_text="Why the PDF could not be rendered")

    def __str__(self) -> str:
        return f"sign-off pack of request {self.request_id} ({self.status})"
