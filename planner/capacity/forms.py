"""The capacity question: which clusters finish N tokens by date D within budget B?"""

from __future__ import annotations

from datetime import date
from typing import Any

from django import forms
from django.utils import timezone

from estimator.core.presets import load_presets
from planner.capacity.search import deadline_days
from planner.capacity.services import MAX_PLAN_GPUS, CapacityQuestion
from planner.common.forms import DateField, choice_field, preset_label, tokens_parse
from planner.scenarios.models import Project, Scenario
from pricing.currency import currency_code_check
from pricing.errors import PricingError
from pricing.models import PriceBook

MAX_CAPACITY_GPUS = MAX_PLAN_GPUS


class ScenarioChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        return f"{obj.project.name} · {obj.name}"


class CapacityForm(forms.Form):
    """We must finish N tokens by date D within budget B: which clusters can?"""

    model_preset = forms.ChoiceField(label="Model", required=False)
    scenario = ScenarioChoiceField(
        queryset=Scenario.objects.none(),
        required=False,
        label="…or the model of a scenario",
        help_text="Takes its model, batch, precision and margins",
    )
    tokens = forms.CharField(required=False, help_text="Blank: the preset's or scenario's")
    deadline = DateField(label="Finish by")
    budget = forms.DecimalField(required=False, max_digits=18, decimal_places=2, min_value=0)
    currency = forms.CharField(max_length=3, initial="USD")
    max_gpus = forms.IntegerField(
        min_value=1,
        max_value=MAX_CAPACITY_GPUS,
        initial=1024,
        label="At most GPUs per option",
        help_text=f"Up to {MAX_CAPACITY_GPUS:,}; quotes are capped at their accelerator count",
    )
    project = forms.ModelChoiceField(
        queryset=Project.objects.none(),
        required=False,
        label="For project",
        empty_label="None",
        help_text="Optional: the plan is listed with the project, and its options become "
        "scenarios there",
    )
    book = forms.ModelChoiceField(
        queryset=PriceBook.objects.none(), required=False, label="Price book", empty_label="None"
    )
    include_spot = forms.BooleanField(required=False, label="Include spot prices")
    include_quotes = forms.BooleanField(required=False, initial=True, label="Valid vendor quotes")
    include_onprem = forms.BooleanField(required=False, initial=True, label="On-prem profiles")

    def __init__(self, *args: Any, scenarios: Any, projects: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        project_field = self.fields["project"]
        assert isinstance(project_field, forms.ModelChoiceField)
        project_field.queryset = projects if projects is not None else Project.objects.none()
        choice_field(self, "model_preset").choices = [("", "—")] + [
            (p.id, preset_label(p)) for p in load_presets().values()
        ]
        scenario_field = self.fields["scenario"]
        book_field = self.fields["book"]
        assert isinstance(scenario_field, forms.ModelChoiceField)
        assert isinstance(book_field, forms.ModelChoiceField)
        scenario_field.queryset = scenarios
        book_field.queryset = PriceBook.objects.filter(status=PriceBook.Status.PUBLISHED)

    def clean_tokens(self) -> float | None:
        return tokens_parse(self.cleaned_data.get("tokens") or "")

    def clean_currency(self) -> str:
        code = str(self.cleaned_data["currency"]).strip().upper()
        try:
            return currency_code_check(code)
        except PricingError as error:
            raise forms.ValidationError(error.message) from None

    def clean_deadline(self) -> date:
        deadline: date = self.cleaned_data["deadline"]
        if deadline_days(deadline, today=timezone.localdate()) < 1:
            raise forms.ValidationError("Pick a date after today.")
        return deadline

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not data.get("model_preset") and not data.get("scenario"):
            self.add_error("model_preset", "Pick a model preset or a scenario.")
        if not (data.get("book") or data.get("include_quotes") or data.get("include_onprem")):
            self.add_error("book", "Pick at least one price source.")
        return data

    def question(self) -> CapacityQuestion:
        """The cleaned form as the plan's question."""
        return CapacityQuestion.from_data(self.cleaned_data)
