"""Projects, their scenarios, the estimation runs of a scenario, and comparisons.

Every planning object belongs to one organisation, through its project; a user sees only
the organisations they are a member of. Writes go through :mod:`planner.scenarios.services`.
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

from estimator.core.memory import result_memory_verdict
from lib.broker import WAITING_FOR_WORKER, WAITING_IN_PROCESS, runs_in_process
from lib.jobs import Job
from lib.money import MONEY_DIGITS, MONEY_PLACES
from organisations.models import Organisation
from pricing.models import OnPremProfile, PriceEntry, VendorQuote

if TYPE_CHECKING:
    from planner.scenarios.prices import PriceObject


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

    @property
    def memory_verdict(self) -> str | None:
        """``fits``, ``tight`` or ``does_not_fit`` once the run has figures, else None."""
        return result_memory_verdict(self.result) if self.result else None

    @property
    def retryable(self) -> bool:
        """Failed, or waiting for a worker although its task was sent longer ago than
        ``JOB_UNCLAIMED_AFTER_S`` (its message may be lost): a retry sends it again."""
        if self.status == RunStatus.FAILED:
            return True
        return (
            self.status == RunStatus.QUEUED
            and self.dispatched_at is not None
            and self.dispatched_at < unclaimed_before(timezone.now())
        )

    @property
    def does_not_fit(self) -> bool:
        """Succeeded, but its layout does not fit in memory: its figures are not achievable."""
        return self.status == RunStatus.SUCCEEDED and self.memory_verdict == "does_not_fit"

    @property
    def status_label(self) -> str:
        """The status in words; a run that does not fit says so rather than 'Succeeded'."""
        return "Does not fit in memory" if self.does_not_fit else self.get_status_display()


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


def unclaimed_before(now: datetime) -> datetime:
    """A queued job sent before this and not taken while the queue is empty lost its
    message (:func:`lib.jobs.recover_unclaimed`)."""
    return now - timedelta(seconds=settings.JOB_UNCLAIMED_AFTER_S)


def run_state(run: EstimationRun, *, now: datetime) -> RunState:
    """Waiting (queued: unsent or unclaimed), running, worker lost, or finished."""
    if run.is_finished:
        return RunState(run.status, run.get_status_display())
    if run.status == RunStatus.QUEUED:
        if run.progress_message == WORKER_LOST:
            return RunState("worker_lost", f"Worker lost, retrying (attempt {run.attempts + 1})…")
        if runs_in_process():
            return RunState("waiting", WAITING_IN_PROCESS)
        if run.dispatched_at is None:
            return RunState(
                "waiting",
                "Waiting for a worker: your run is saved and will start when workers are back.",
            )
        return RunState("waiting", WAITING_FOR_WORKER)
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
