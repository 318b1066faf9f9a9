"""Input and output serializers of budget requests (see :mod:`planner.scenarios.serializers`).

A request's ``state`` is never an input: a body naming it is refused with a 400, so nobody
believes a PATCH moved a request along; the transition endpoints do that.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import serializers

from lib.inputs import StorableInput
from planner.budgets.models import AuditEvent, BudgetDecision, BudgetRequest
from planner.budgets.selectors import budget_requests_for
from planner.budgets.warnings import run_warnings, warnings_json
from planner.scenarios import selectors
from planner.scenarios.models import EstimationRun
from planner.scenarios.serializers import ScopedPrimaryKeyField, money_field

#: What ``override_reason`` is for, in the API's documentation.
OVERRIDE_HELP = (
    "Why the budget should be funded although the run has a blocking warning (it does not "
    "fit in memory). Without it such a request is refused with a 400 on run; recorded in the "
    "audit trail and the snapshot"
)
#: The answer to a request body that tries to set a budget request's state.
STATE_READ_ONLY = (
    "is changed only by the transition endpoints: submit, approve, reject, request-changes, close"
)


class BudgetDecisionOutput(serializers.ModelSerializer):
    approver_name = serializers.CharField(source="approver.get_username", read_only=True)

    class Meta:
        model = BudgetDecision
        fields = ["approver", "approver_name", "decision", "comment", "submission", "created_at"]
        read_only_fields = fields


class AuditEventOutput(serializers.ModelSerializer):
    actor_name = serializers.SerializerMethodField()

    class Meta:
        model = AuditEvent
        fields = [
            "actor",
            "actor_name",
            "action",
            "from_state",
            "to_state",
            "changes",
            "comment",
            "created_at",
        ]
        read_only_fields = fields

    def get_actor_name(self, event: AuditEvent) -> str:
        return event.actor.get_username() if event.actor is not None else ""


class BudgetRequestOutput(serializers.ModelSerializer):
    """A budget request as listed: everything but the snapshot and the timeline."""

    project_name = serializers.CharField(source="project.name", read_only=True)
    created_by_name = serializers.CharField(source="created_by.get_username", read_only=True)
    decisions = BudgetDecisionOutput(many=True, read_only=True)

    class Meta:
        model = BudgetRequest
        fields = [
            "id",
            "project",
            "project_name",
            "run",
            "alternatives",
            "title",
            "basis",
            "amount",
            "contingency",
            "currency",
            "justification",
            "override_reason",
            "state",
            "approvals_required",
            "decisions",
            "snapshot_sha256",
            "supersedes",
            "created_by",
            "created_by_name",
            "created_at",
            "updated_at",
            "submitted_at",
            "decided_at",
        ]
        read_only_fields = fields


class BudgetRequestDetailOutput(BudgetRequestOutput):
    """A budget request with its frozen snapshot and its audit trail, oldest event first."""

    snapshot = serializers.JSONField(
        read_only=True,
        allow_null=True,
        help_text="The document frozen at the last submission (null before the first); "
        "snapshot_sha256 is the SHA-256 of its canonical JSON",
    )
    timeline = AuditEventOutput(source="audit_events", many=True, read_only=True)
    warnings = serializers.SerializerMethodField(
        help_text="The chosen run's warnings as they stand now, blocking ones first: "
        "[{code, severity (block or warn), message}]; the snapshot keeps those at submission"
    )

    class Meta(BudgetRequestOutput.Meta):
        fields = [*BudgetRequestOutput.Meta.fields, "warnings", "snapshot", "timeline"]
        read_only_fields = fields

    def get_warnings(self, request: BudgetRequest) -> list[dict[str, str]]:
        return warnings_json(run_warnings(request.run, project=request.project))


class StateRefusedMixin(StorableInput):
    """Refuses a body that names ``state`` instead of dropping the key without a word."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping) and "state" in data:
            raise serializers.ValidationError({"state": [STATE_READ_ONLY]})
        return super().to_internal_value(data)


class BudgetRequestInput(StateRefusedMixin):
    """A draft request for the budget of a finished run, compared with other runs."""

    storage_model = BudgetRequest

    run = ScopedPrimaryKeyField(EstimationRun, selectors.runs_for, help_text="A succeeded run")
    title = serializers.CharField(max_length=200)
    justification = serializers.CharField()
    basis = serializers.ChoiceField(BudgetRequest.Basis.choices, required=False)
    contingency = money_field(
        required=False,
        allow_null=True,
        help_text="Added to P50 on the p50_contingency basis; P90 - P50 when omitted",
    )
    alternatives = ScopedPrimaryKeyField(
        EstimationRun, selectors.runs_for, many=True, required=False, help_text="Run ids"
    )
    supersedes = ScopedPrimaryKeyField(
        BudgetRequest,
        budget_requests_for,
        required=False,
        allow_null=True,
        help_text="An approved request of the same project that this one replaces",
    )
    override_reason = serializers.CharField(
        required=False, allow_blank=True, default="", help_text=OVERRIDE_HELP
    )


class BudgetRequestUpdateInput(StateRefusedMixin):
    """The editable fields of a draft, or of a request sent back for changes."""

    storage_model = BudgetRequest

    title = serializers.CharField(max_length=200, required=False)
    justification = serializers.CharField(required=False)
    basis = serializers.ChoiceField(BudgetRequest.Basis.choices, required=False)
    contingency = money_field(required=False, allow_null=True, help_text="null: P90 - P50")
    alternatives = ScopedPrimaryKeyField(
        EstimationRun, selectors.runs_for, many=True, required=False, help_text="Run ids"
    )
    override_reason = serializers.CharField(
        required=False, allow_blank=True, help_text=OVERRIDE_HELP
    )
    comment = serializers.CharField(
        required=False, allow_blank=True, help_text="Why it changed, for the audit trail"
    )


class BudgetTransitionInput(StorableInput):
    storage_model = BudgetDecision

    comment = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        help_text="Recorded in the timeline; required to reject or request changes",
    )
