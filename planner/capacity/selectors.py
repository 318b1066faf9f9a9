"""Reads of the capacity room, scoped to the organisations the user belongs to."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db.models import QuerySet
from django.db.models.functions import Coalesce

from lib.actors import Actor
from organisations.selectors import organisations_for
from planner.capacity.models import CapacityPlan, ChunkStatus
from planner.scenarios.models import heartbeat_stale_before


def capacity_plans_for(user: Actor) -> QuerySet[CapacityPlan]:
    """The capacity plans of the user's organisations, newest first."""
    return CapacityPlan.objects.filter(organisation__in=organisations_for(user)).select_related(
        "organisation", "project", "created_by"
    )


def plan_worker_lost(plan: CapacityPlan, *, now: datetime) -> str:
    """What a plan whose worker was lost says, else "": a chunk running without a heartbeat
    for longer than ``RUN_STALE_AFTER_S`` (the dispatcher queues it again), or chunks queued
    again after losing theirs."""
    if plan.is_finished:
        return ""
    stale_before = heartbeat_stale_before(now)
    chunks = list(
        plan.chunks.filter(status__in=[ChunkStatus.QUEUED, ChunkStatus.RUNNING])
        .annotate(signed_at=Coalesce("heartbeat_at", "started_at"))
        .values_list("status", "attempts", "signed_at")
    )
    silent = [
        sign
        for status, _, sign in chunks
        if status == ChunkStatus.RUNNING and (sign is None or sign < stale_before)
    ]
    if silent:
        oldest = min((sign for sign in silent if sign is not None), default=stale_before)
        seconds = int((now - oldest).total_seconds())
        return (
            f"Worker lost: no heartbeat for {seconds} s on {len(silent)} chunk(s); the "
            "dispatcher queues them again for the next worker."
        )
    again = [
        attempts for status, attempts, _ in chunks if status == ChunkStatus.QUEUED and attempts
    ]
    if again:
        return (
            f"Worker lost: {len(again)} chunk(s) queued again, attempt {max(again) + 1} of "
            f"{settings.RUN_MAX_ATTEMPTS}; waiting for a worker."
        )
    return ""
