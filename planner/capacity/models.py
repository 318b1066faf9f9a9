"""Capacity plans and the chunks the workers search them in."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse

from lib.jobs import Job
from lib.money import MONEY_DIGITS, MONEY_PLACES
from organisations.models import Organisation
from planner.scenarios.models import (
    Project,
)


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
