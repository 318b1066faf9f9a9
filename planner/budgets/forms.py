"""Forms of the budget-request pages: they parse input; :mod:`planner.budgets.services` decides.

The amount is never typed in: the service derives it from the run's figures and the basis
(P50 + contingency, or P90), so the forms carry only what the requester chooses.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from django import forms
from django.db.models import QuerySet

from planner.budgets.models import BudgetRequest
from planner.scenarios.models import EstimationRun

JUSTIFICATION_HELP = (
    "Why this scenario, why now, and what happens if the budget is not approved. "
    "Finance reads this first."
)
OVERRIDE_HELP = (
    "The run has a blocking warning (above). Say why finance should fund it as it is: "
    "without a reason the request is refused. Kept in the audit trail and the snapshot."
)


def run_label(run: EstimationRun) -> str:
    """``H100 list price · run 12 · P50 123,456 USD · 14.2 days`` (an alternative's checkbox)."""
    budget = run.budget or {}
    cost = budget.get("cost", {}).get("p50")
    days = budget.get("training_days", {}).get("p50")
    parts = [run.scenario.name, f"run {run.pk}"]
    if cost is not None:
        parts.append(f"P50 {Decimal(cost):,.0f} {budget.get('currency', '')}".rstrip())
    if days is not None:
        parts.append(f"{float(days):,.1f} days")
    return " · ".join(parts)


class RunChoices(forms.ModelMultipleChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        return run_label(obj)


class RequestChoice(forms.ModelChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        return f"#{obj.pk} {obj.title} · {obj.amount:,.2f} {obj.currency}"


class BudgetRequestForm(forms.Form):
    """A new request (with ``supersedes``) or an edit of one (without it)."""

    title = forms.CharField(max_length=200, help_text="One line finance will recognise.")
    justification = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 5}), help_text=JUSTIFICATION_HELP
    )
    basis = forms.ChoiceField(
        choices=BudgetRequest.Basis.choices,
        initial=BudgetRequest.Basis.P50_CONTINGENCY,
        widget=forms.RadioSelect,
        label="Amount to request",
    )
    contingency = forms.DecimalField(
        required=False,
        min_value=Decimal(0),
        max_digits=18,
        decimal_places=2,
        help_text="Added to the P50 cost. Blank: P90 - P50. Ignored with the P90 basis.",
    )
    alternatives = RunChoices(
        queryset=EstimationRun.objects.none(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Compared with",
        help_text="The other scenarios' latest successful runs, shown beside the chosen one.",
    )
    supersedes = RequestChoice(
        queryset=BudgetRequest.objects.none(),
        required=False,
        empty_label="— nothing: a new budget —",
        help_text="Approving this request marks the chosen approved budget superseded.",
    )
    comment = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        label="What changed",
        help_text="Kept in the audit trail with the changes.",
    )
    # Not required here: the service refuses a blocked run without it, and says why.
    override_reason = forms.CharField(
        required=False,
        max_length=5000,
        widget=forms.Textarea(attrs={"rows": 3}),
        label="Override reason",
        help_text=OVERRIDE_HELP,
    )

    def __init__(
        self,
        *args: Any,
        alternatives: QuerySet[EstimationRun],
        supersedes: QuerySet[BudgetRequest] | None = None,
        default_contingency: Decimal | None = None,
        needs_override: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        if not needs_override:  # asked only when the chosen run has a blocking warning
            del self.fields["override_reason"]
        self._choices_field("alternatives").queryset = alternatives
        if supersedes is None:  # editing: what a request supersedes is fixed at creation
            del self.fields["supersedes"]
        else:
            del self.fields["comment"]
            self._choices_field("supersedes").queryset = supersedes
        if default_contingency is not None:
            self.fields["contingency"].help_text = (
                f"Added to the P50 cost. Blank: P90 - P50 = {default_contingency:,.2f}. "
                "Ignored with the P90 basis."
            )

    def _choices_field(self, name: str) -> forms.ModelChoiceField[Any]:
        field = self.fields[name]
        assert isinstance(field, forms.ModelChoiceField)
        return field

    def clean_title(self) -> str:
        return str(self.cleaned_data["title"]).strip()

    def error_field(self, key: str) -> str:
        """Where a service's refusal shows: a refusal of the run beside the override reason."""
        return "override_reason" if key == "run" and "override_reason" in self.fields else key

    def service_arguments(self) -> dict[str, Any]:
        """Keyword arguments of ``budget_request_create`` / ``budget_request_update``."""
        data = self.cleaned_data
        arguments: dict[str, Any] = {
            "title": data["title"],
            "justification": data["justification"],
            "basis": data["basis"],
            "contingency": data.get("contingency"),
            "alternatives": list(data.get("alternatives") or []),
        }
        for optional in ("supersedes", "comment", "override_reason"):
            if optional in self.fields:
                arguments[optional] = data.get(optional) or (
                    None if optional == "supersedes" else ""
                )
        return arguments


def initial_from(request: BudgetRequest, alternatives: Iterable[EstimationRun]) -> dict[str, Any]:
    """The edit form's starting values: the request as it stands."""
    return {
        "title": request.title,
        "justification": request.justification,
        "basis": request.basis,
        "contingency": request.contingency,
        "alternatives": [run.pk for run in alternatives],
        "override_reason": request.override_reason,
    }


class BudgetActionForm(forms.Form):
    """The comment that goes with a submission, a decision or a closure."""

    comment = forms.CharField(
        required=False,
        max_length=5000,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Kept in the audit trail. Required to reject or to request changes.",
    )

    def comment_text(self) -> str:
        return str(self.cleaned_data.get("comment", "")) if self.is_valid() else ""
