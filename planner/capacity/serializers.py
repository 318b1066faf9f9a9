"""Input and output of the capacity-plan endpoints (``/api/v1/capacity-plans/``)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from estimator.core.presets import load_presets
from lib.actors import Actor
from lib.inputs import StorableInput
from lib.money import MONEY_DIGITS, MONEY_PLACES
from planner.capacity.models import CapacityPlan
from planner.capacity.services import MAX_PLAN_GPUS, CapacityQuestion
from planner.common.forms import MAX_TOKENS, quantity_parse
from planner.scenarios import selectors
from planner.scenarios.models import Project, Scenario
from planner.scenarios.serializers import ScopedPrimaryKeyField
from pricing.access import visible
from pricing.models import PriceBook


def _books_for(user: Actor) -> QuerySet[PriceBook]:
    published = PriceBook.objects.filter(status=PriceBook.Status.PUBLISHED)
    return visible(published, user, field="organisation", public=True)


@extend_schema_field({"oneOf": [{"type": "string", "example": "2T"}, {"type": "number"}]})
class TokensField(serializers.Field):
    """A token count: a number, or text such as ``"2T"``, ``"300B"`` or ``"2e12"``."""

    default_error_messages = {
        "invalid": "Write a number of tokens such as 2T, 300B or 2e12.",
        "range": f"Train on between 1 and {MAX_TOKENS:.0e} tokens.",
    }

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float | str):
            self.fail("invalid")
        try:
            tokens = float(data) if not isinstance(data, str) else quantity_parse(data)
        except (ValueError, OverflowError):
            self.fail("invalid")
        if not 1 <= tokens <= MAX_TOKENS:
            self.fail("range")
        return tokens

    def to_representation(self, value: Any) -> Any:
        return value


class CapacityPlanInput(StorableInput):
    """The capacity form's question: a model (``model_preset`` or ``scenario``), ``tokens``
    (blank: the model's), ``deadline``, ``budget`` and ``currency``, the price sources and
    the most GPUs per option."""

    storage_model = CapacityPlan

    model_preset = serializers.ChoiceField(
        choices=[], required=False, allow_blank=True, help_text="A model preset id"
    )
    scenario = ScopedPrimaryKeyField(
        Scenario,
        selectors.scenarios_for,
        required=False,
        allow_null=True,
        help_text="Plan for this scenario's model, batch, precision and margins instead",
    )
    tokens = TokensField(required=False, allow_null=True, help_text='e.g. "2T", 2e12')
    deadline = serializers.DateField(help_text="Finish by (yyyy-mm-dd), after today")
    budget = serializers.DecimalField(
        max_digits=MONEY_DIGITS,
        decimal_places=MONEY_PLACES,
        min_value=0,
        required=False,
        allow_null=True,
    )
    currency = serializers.CharField(max_length=3, default="USD")
    max_gpus = serializers.IntegerField(min_value=1, max_value=MAX_PLAN_GPUS, default=1024)
    book = ScopedPrimaryKeyField(
        PriceBook,
        _books_for,
        required=False,
        allow_null=True,
        help_text="A published price book (public, or your organisation's)",
    )
    include_spot = serializers.BooleanField(default=False)
    include_quotes = serializers.BooleanField(default=True)
    include_onprem = serializers.BooleanField(default=True)
    project = ScopedPrimaryKeyField(
        Project,
        selectors.projects_for,
        required=False,
        allow_null=True,
        help_text="Needed when you belong to several organisations",
    )

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        preset = fields["model_preset"]
        assert isinstance(preset, serializers.ChoiceField)
        preset.choices = list(load_presets())
        return fields

    def validate_currency(self, value: str) -> str:
        return value.strip().upper()

    def question(self) -> tuple[CapacityQuestion, Project | None]:
        data = self.validated_data
        return CapacityQuestion.from_data(data), data.get("project")


class CapacityPlanOutput(serializers.ModelSerializer):
    """A plan: its question, status and progress, and once succeeded the ``options`` that
    meet the deadline and budget (cheapest first) and the cost-versus-days ``frontier``."""

    options = serializers.SerializerMethodField(
        help_text="Points meeting both limits, cheapest first: cluster, layout, days, "
        "GPU-hours, cost (decimal text, the plan's currency), MFU, the option's index in "
        "priced_options"
    )
    frontier = serializers.SerializerMethodField(help_text="The Pareto frontier, fastest first")
    priced_options = serializers.JSONField(source="options", read_only=True)
    notes = serializers.SerializerMethodField(help_text="Prices left out or refused, and why")

    class Meta:
        model = CapacityPlan
        fields = [
            "id",
            "organisation",
            "project",
            "name",
            "status",
            "progress",
            "chunks_total",
            "error",
            "inputs",
            "deadline",
            "deadline_days",
            "budget",
            "currency",
            "scenario",
            "priced_options",
            "options",
            "frontier",
            "notes",
            "estimator_version",
            "rerun_of",
            "created_by",
            "created_at",
            "started_at",
            "finished_at",
        ]

    def get_options(self, plan: CapacityPlan) -> list[dict[str, Any]]:
        return list((plan.result or {}).get("feasible", []))

    def get_frontier(self, plan: CapacityPlan) -> list[dict[str, Any]]:
        return list((plan.result or {}).get("frontier", []))

    def get_notes(self, plan: CapacityPlan) -> list[str]:
        return [*plan.skipped, *(plan.result or {}).get("notes", [])]


class CapacityPlanListOutput(CapacityPlanOutput):
    """A plan in a list: without the options and frontier (read the plan for them)."""

    class Meta(CapacityPlanOutput.Meta):
        fields = [
            name
            for name in CapacityPlanOutput.Meta.fields
            if name not in ("options", "frontier", "priced_options", "scenario")
        ]
