"""The audit trail: one append-only row per transition or edit of a request or scenario."""

from __future__ import annotations

from typing import Any

from lib.actors import Actor, actor_user
from planner.budgets.models import AuditEvent, BudgetRequest
from planner.scenarios.models import Scenario


def audit_record(
    *,
    request: BudgetRequest | None,
    project_id: int,
    actor: Actor,
    action: str,
    from_state: str = "",
    to_state: str = "",
    changes: dict[str, Any] | None = None,
    comment: str = "",
    scenario: Scenario | None = None,
) -> AuditEvent:
    return AuditEvent.objects.create(
        request=request,
        project_id=project_id,
        scenario=scenario,
        actor=actor_user(actor),
        action=action,
        from_state=from_state,
        to_state=to_state,
        changes=changes or {},
        comment=comment,
    )
