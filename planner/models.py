"""Organisations, projects, scenarios, estimation runs and comparisons.

Every planning object belongs to one organisation, through its project; a user sees only
the organisations they are a member of. Writes go through :mod:`planner.services`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from lib.appendonly import AppendOnlyModel
from lib.jobs import Job, Outbox
from lib.money import MONEY_DIGITS, MONEY_PLACES
from organisations.models import Membership as Membership
from organisations.models import Organisation as Organisation
from organisations.models import Role as Role
from pricing.models import OnPremProfile, PriceEntry, VendorQuote

if TYPE_CHECKING:
    from planner.prices import PriceObject


class Project(models.Model):
    """A training proposal: what to train, by when, within which budget."""

    organisation = models.ForeignKey(
        Organisation, on_delete=models.PROTECT, related_name="projects"
    )
    name = models.CharField(max_length=200)
    goal = models.TextField(blank=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="projects_owned"
    )
    deadline = models.DateField(null=True, blank=True)
    budget_ceiling = models.DecimalField(
        max_digits=MONEY_DIGITS, decimal_places=MONEY_PLACES, null=True, blank=True
    )
    currency = models.CharField(max_length=3, default="USD")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        constraints = [
            models.UniqueConstraint(fields=["organisation", "name"], name="project_unique_name"),
            models.CheckConstraint(
                condition=Q(budget_ceiling__isnull=True) | Q(budget_ceiling__gt=0),
                name="project_budget_positive",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("planner:project-detail", args=[self.pk])


class PriceSource(models.TextChoices):
    PRICE_ENTRY = "price_entry", "Price-book entry"
    VENDOR_QUOTE = "vendor_quote", "Vendor quote"
    ONPREM_PROFILE = "onprem_profile", "On-prem profile"


class Scenario(models.Model):
    """One way to run a project's training: the scenario JSON plus where its price comes from.

    ``spec`` is a scenario in the contract's format (``shared/scenario-format.md``), already
    validated by the estimator when it was saved.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="scenarios")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    model_preset = models.CharField(
        max_length=40, blank=True, help_text="The preset the model section came from, if any"
    )
    spec = models.JSONField(help_text="The scenario in the estimator's format (version 1)")
    price_source = models.CharField(max_length=20, choices=PriceSource.choices)
    price_entry = models.ForeignKey(
        PriceEntry, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    vendor_quote = models.ForeignKey(
        VendorQuote, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    onprem_profile = models.ForeignKey(
        OnPremProfile, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    pue = models.DecimalField(
        max_digits=4,
        decimal_places=2,
        default=Decimal("1.20"),
        help_text="Power usage effectiveness of the data centre, for the energy figure",
    )
    utilisation_low = models.DecimalField(
        max_digits=4,
        decimal_places=3,
        default=Decimal("0.900"),
        help_text="Lowest expected share of wall clock the job actually runs",
    )
    utilisation_high = models.DecimalField(max_digits=4, decimal_places=3, default=Decimal("1"))
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["project", "name"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="scenario_unique_name"),
            models.CheckConstraint(
                condition=(
                    Q(
                        price_source="price_entry",
                        price_entry__isnull=False,
                        vendor_quote__isnull=True,
                        onprem_profile__isnull=True,
                    )
                    | Q(
                        price_source="vendor_quote",
                        price_entry__isnull=True,
                        vendor_quote__isnull=False,
                        onprem_profile__isnull=True,
                    )
                    | Q(
                        price_source="onprem_profile",
                        price_entry__isnull=True,
                        vendor_quote__isnull=True,
                        onprem_profile__isnull=False,
                    )
                ),
                name="scenario_one_price_source",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.project}: {self.name}"

    def get_absolute_url(self) -> str:
        return reverse("planner:scenario-detail", args=[self.pk])

    @property
    def price(self) -> PriceObject | None:
        """The record the scenario is costed at: its entry, quote or on-prem profile.

        The check constraint leaves exactly one set on a saved scenario.
        """
        return self.price_entry or self.vendor_quote or self.onprem_profile

    @property
    def accelerator_id(self) -> str:
        return str(self.spec["cluster"]["accelerator"])

    @property
    def num_gpus(self) -> int:
        return int(self.spec["cluster"]["num_gpus"])


class RunStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"


class EstimationRun(Job):
    """One estimation of a scenario, run by a Celery worker.

    ``inputs`` and ``price`` are copies taken when the run started, so a later edit of the
    scenario or of a price does not change what this run computed.
    """

    scenario = models.ForeignKey(Scenario, on_delete=models.CASCADE, related_name="runs")
    status = models.CharField(max_length=12, choices=RunStatus.choices, default=RunStatus.QUEUED)
    progress = models.FloatField(default=0.0, help_text="0..1")
    progress_message = models.CharField(max_length=200, blank=True)
    error = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    seed = models.BigIntegerField(help_text="Monte Carlo seed: the same seed reproduces P50/P90")
    samples = models.PositiveIntegerField(default=4000)
    inputs = models.JSONField(help_text="The scenario as it was when the run started")
    price = models.JSONField(help_text="The price used, with its source and currency")
    estimator_version = models.CharField(max_length=20, blank=True)
    result = models.JSONField(null=True, blank=True, help_text="The estimator's output")
    montecarlo = models.JSONField(null=True, blank=True)
    budget = models.JSONField(null=True, blank=True, help_text="Budget figures (Decimal text)")
    levers = models.JSONField(
        null=True, blank=True, help_text="Single changes that save time or money, priced"
    )
    sensitivity = models.JSONField(
        null=True, blank=True, help_text="Cost and days at each uncertain input's range ends"
    )
    task_id = models.CharField(
        max_length=64, blank=True, help_text="The current dispatch: only its task may run it"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    dispatched_at = models.DateTimeField(
        null=True, blank=True, help_text="When its task reached the broker; empty: not sent yet"
    )
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="Last sign of life of the worker running it"
    )
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(progress__gte=0) & Q(progress__lte=1), name="run_progress_0_1"
            )
        ]
        indexes = [
            # The dispatcher's two questions: what is unsent, whose worker went quiet.
            models.Index(
                fields=["status", "dispatched_at"],
                name="run_unfinished",
                condition=Q(status__in=["queued", "running"]),
            )
        ]

    def __str__(self) -> str:
        return f"Run {self.pk} of {self.scenario} ({self.status})"

    def get_absolute_url(self) -> str:
        return reverse("planner:run-detail", args=[self.pk])

    @property
    def is_finished(self) -> bool:
        return self.status in (RunStatus.SUCCEEDED, RunStatus.FAILED)

    @property
    def state(self) -> RunState:
        """What the run is doing, as the page, its status JSON and the dispatcher see it."""
        return run_state(self, now=timezone.now())


WORKER_LOST = "worker lost, retrying"


@dataclass(frozen=True)
class RunState:
    """A run's liveness: ``code`` is waiting, running, worker_lost, succeeded or failed."""

    code: str
    message: str

    @property
    def is_live(self) -> bool:
        """A worker is on it, so its percentage means something."""
        return self.code == "running"


def heartbeat_stale_before(now: datetime) -> datetime:
    """A running run whose last heartbeat is older than this has lost its worker."""
    return now - timedelta(seconds=settings.RUN_STALE_AFTER_S)


def run_state(run: EstimationRun, *, now: datetime) -> RunState:
    """Waiting (queued: unsent or unclaimed), running, worker lost, or finished."""
    if run.is_finished:
        return RunState(run.status, run.get_status_display())
    if run.status == RunStatus.QUEUED:
        if run.progress_message == WORKER_LOST:
            return RunState("worker_lost", f"Worker lost, retrying (attempt {run.attempts + 1})…")
        if run.dispatched_at is None:
            return RunState(
                "waiting",
                "Waiting for a worker: your run is saved and will start when workers are back.",
            )
        return RunState("waiting", "Waiting for a worker…")
    last_sign = run.last_sign
    if last_sign is not None and last_sign < heartbeat_stale_before(now):
        seconds = int((now - last_sign).total_seconds())
        return RunState("worker_lost", f"Worker lost, retrying: no heartbeat for {seconds} s.")
    return RunState("running", run.progress_message or "Starting…")


class Comparison(models.Model):
    """Scenarios of one project chosen to be compared side by side."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="comparisons")
    name = models.CharField(max_length=200)
    scenarios = models.ManyToManyField(Scenario, related_name="comparisons")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.project}: {self.name}"

    def get_absolute_url(self) -> str:
        return reverse("planner:comparison-detail", args=[self.pk])


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


class CapacityPlanChunk(Job):
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
