"""Input serializers parse and type-check requests; output serializers render records.

No planning rule lives here: names, specs, prices and roles are checked by the services.
Ids in the input resolve only among the objects the requesting user can see, so an id from
another organisation is a 400 on that field, exactly like an id that does not exist. Every
input serializer derives from :class:`lib.inputs.StorableInput`: text PostgreSQL
cannot store (a NUL anywhere, even inside ``spec``; too long for its column) is a 400.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.db.models import Model, QuerySet
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from estimator.core import schema
from lib.actors import Actor
from lib.inputs import StorableInput
from lib.money import MONEY_DIGITS, MONEY_PLACES
from organisations.models import Organisation, Role
from planner.common.access import user_roles
from planner.scenarios import selectors
from planner.scenarios.deadline import run_deadline_json
from planner.scenarios.models import Comparison, EstimationRun, PriceSource, Project, Scenario
from planner.scenarios.prices import PRICE_MODELS, price_queryset
from planner.scenarios.selectors import ComparisonRow
from planner.scenarios.services import price_snapshot

#: The request's price fields: one per price source, named as the source.
PRICE_FIELDS = tuple(PRICE_MODELS)
#: What the scenario schema says of its keys' bounds and defaults, for the ``spec`` fields'
#: help (the services check a spec with the estimator, which applies the same schema).
SPEC_KEYS_HELP = f"Bounds and defaults (docs/scenario-keys.md): {schema.summary()}."


class ScopedPrimaryKeyField(serializers.PrimaryKeyRelatedField):
    """An id looked up in a selector's queryset for the requesting user.

    An object the user cannot see fails like a missing one: "Invalid pk ... does not exist".
    """

    def __init__(
        self, model: type[Model], selector: Callable[[Actor], QuerySet[Any]], **kwargs: Any
    ) -> None:
        self.selector = selector
        # Only the schema reads this queryset (for the id's type); lookups use the selector.
        kwargs["queryset"] = model._default_manager.none()
        super().__init__(**kwargs)

    def get_queryset(self) -> QuerySet[Any]:
        request = self.context.get("request")
        return self.selector(request.user if request is not None else AnonymousUser())


def money_field(**kwargs: Any) -> serializers.DecimalField:
    return serializers.DecimalField(max_digits=MONEY_DIGITS, decimal_places=MONEY_PLACES, **kwargs)


# --- Organisations --------------------------------------------------------------------------


class OrganisationOutput(serializers.ModelSerializer):
    roles = serializers.SerializerMethodField(help_text="The requesting user's roles here")

    class Meta:
        model = Organisation
        fields = ["id", "name", "slug", "base_currency", "roles", "created_at"]

    @extend_schema_field(serializers.ListField(child=serializers.ChoiceField(Role.choices)))
    def get_roles(self, organisation: Organisation) -> list[str]:
        user = self.context["request"].user
        prefetched = getattr(organisation, "user_memberships", None)
        if prefetched is None or user.is_superuser:
            return sorted(user_roles(user, organisation))
        return sorted({membership.role for membership in prefetched})


# --- Projects -------------------------------------------------------------------------------


class ProjectOutput(serializers.ModelSerializer):
    organisation_name = serializers.CharField(source="organisation.name", read_only=True)
    owner = serializers.CharField(source="owner.username", read_only=True)

    class Meta:
        model = Project
        fields = [
            "id",
            "organisation",
            "organisation_name",
            "name",
            "goal",
            "owner",
            "deadline",
            "budget_ceiling",
            "currency",
            "created_at",
            "updated_at",
        ]


class ProjectInput(StorableInput):
    storage_model = Project

    organisation = ScopedPrimaryKeyField(Organisation, selectors.organisations_for)
    name = serializers.CharField(max_length=200)
    goal = serializers.CharField(required=False, allow_blank=True)
    deadline = serializers.DateField(required=False, allow_null=True)
    budget_ceiling = money_field(required=False, allow_null=True)
    currency = serializers.CharField(max_length=3, required=False)


class ProjectUpdateInput(ProjectInput):
    organisation = None  # type: ignore[assignment]  # a project never changes organisation


# --- Scenarios ------------------------------------------------------------------------------


class PriceSummaryOutput(serializers.Serializer):
    """The price a run of the scenario uses (``services.price_snapshot``)."""

    source = serializers.CharField(  # type: ignore[assignment]
        help_text="The scenario's price_source"
    )
    id = serializers.IntegerField()
    label = serializers.CharField()  # type: ignore[assignment]
    price_per_gpu_hour = serializers.CharField(help_text="Decimal as text, per GPU-hour")
    currency = serializers.CharField()
    reference = serializers.CharField()
    book_id = serializers.IntegerField(required=False, help_text="Price-book entries only")
    details = serializers.CharField(allow_blank=True)


class ScenarioOutput(serializers.ModelSerializer):
    organisation = serializers.IntegerField(source="project.organisation_id", read_only=True)
    accelerator = serializers.CharField(source="accelerator_id", read_only=True)
    num_gpus = serializers.IntegerField(read_only=True)
    price = serializers.SerializerMethodField()

    class Meta:
        model = Scenario
        fields = [
            "id",
            "project",
            "organisation",
            "name",
            "description",
            "model_preset",
            "spec",
            "accelerator",
            "num_gpus",
            "price_source",
            "price_entry",
            "vendor_quote",
            "onprem_profile",
            "price",
            "pue",
            "utilisation_low",
            "utilisation_high",
            "created_by",
            "created_at",
            "updated_at",
        ]

    @extend_schema_field(PriceSummaryOutput)
    def get_price(self, scenario: Scenario) -> dict[str, Any]:
        return price_snapshot(scenario)


class PriceInput(StorableInput):
    """Where the price comes from: ``price_source`` and the id of that source's record."""

    storage_model = Scenario

    price_source = serializers.ChoiceField(PriceSource.choices)
    price_entry = serializers.PrimaryKeyRelatedField(
        queryset=price_queryset("price_entry"), required=False, allow_null=True
    )
    vendor_quote = serializers.PrimaryKeyRelatedField(
        queryset=price_queryset("vendor_quote"), required=False, allow_null=True
    )
    onprem_profile = serializers.PrimaryKeyRelatedField(
        queryset=price_queryset("onprem_profile"), required=False, allow_null=True
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        # The shape of the request only: is the price named by the field its source says?
        given = [field for field in PRICE_FIELDS if attrs.get(field) is not None]
        source = attrs.get("price_source")
        if source is None and given:
            raise serializers.ValidationError({"price_source": ["is required with a price"]})
        stray = [field for field in given if field != source]
        if source is not None and stray:
            raise serializers.ValidationError(
                {stray[0]: [f"must be empty when the price source is {source}"]}
            )
        return attrs


def price_choice(data: dict[str, Any]) -> dict[str, Any]:
    """Move the parsed price fields of ``data`` into the services' ``price_source``/``price``.

    Empty when the request changes no price (a partial update).
    """
    prices = {field: data.pop(field, None) for field in PRICE_FIELDS}
    if data.get("price_source") is None:
        data.pop("price_source", None)
        return {}
    source = data.pop("price_source")
    return {"price_source": source, "price": prices[source]}


class ScenarioInput(PriceInput):
    """A scenario: the estimator's JSON (``spec``) and its price (``price_source`` plus the
    id of a price-book entry, vendor quote or on-prem profile)."""

    project = ScopedPrimaryKeyField(Project, selectors.projects_for)
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(required=False, allow_blank=True)
    model_preset = serializers.CharField(max_length=40, required=False, allow_blank=True)
    spec = serializers.JSONField(
        help_text="The scenario in the estimator's format, version 1 (scenario-format.md). "
        + SPEC_KEYS_HELP
    )
    pue = serializers.DecimalField(max_digits=4, decimal_places=2, required=False)
    utilisation_low = serializers.DecimalField(max_digits=4, decimal_places=3, required=False)
    utilisation_high = serializers.DecimalField(max_digits=4, decimal_places=3, required=False)


class ScenarioUpdateInput(ScenarioInput):
    project = None  # type: ignore[assignment]  # a scenario never moves to another project


class ScenarioDocument(StorableInput):
    """A scenario as a portable document: what ``export`` returns and ``import`` reads."""

    storage_model = Scenario

    format = serializers.CharField(help_text='"trainplan-scenario"')
    version = serializers.IntegerField()
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(required=False, allow_blank=True)
    model_preset = serializers.CharField(max_length=40, required=False, allow_blank=True)
    scenario = serializers.JSONField(
        help_text=f"The scenario in the estimator's format. {SPEC_KEYS_HELP}"
    )
    price_source = serializers.ChoiceField(PriceSource.choices)
    price_id = serializers.IntegerField()
    pue = serializers.DecimalField(max_digits=4, decimal_places=2, required=False)
    utilisation = serializers.ListField(
        child=serializers.DecimalField(max_digits=4, decimal_places=3),
        min_length=2,
        max_length=2,
        required=False,
        help_text="[low, high]",
    )


# --- Runs -----------------------------------------------------------------------------------

DEADLINE_HELP = (
    "The run against its project's deadline, from today: deadline, days_available, p50_days, "
    "p90_days, probability (of finishing in time, from the Monte Carlo), verdict (meets, "
    "misses_p90, misses_p50 or no_deadline) and text; null before the run has succeeded"
)


class RunOutput(serializers.ModelSerializer):
    scenario_name = serializers.CharField(source="scenario.name", read_only=True)
    project = serializers.IntegerField(source="scenario.project_id", read_only=True)
    price = PriceSummaryOutput(read_only=True)
    state = serializers.CharField(
        source="state.code",
        read_only=True,
        help_text="waiting (saved, no worker has it yet), running, worker_lost (its worker "
        "stopped sending heartbeats; the dispatcher queues it again), succeeded or failed",
    )
    state_message = serializers.CharField(
        source="state.message", read_only=True, help_text="The state in words, for a person"
    )
    memory_verdict = serializers.CharField(
        read_only=True,
        allow_null=True,
        help_text="Once it has figures: fits, tight (over the framework's usable memory, within "
        "the device) or does_not_fit (its figures are not achievable; no budget can be "
        "requested from it); null before",
    )
    deadline = serializers.SerializerMethodField(help_text=DEADLINE_HELP)

    @extend_schema_field(serializers.DictField(allow_null=True))
    def get_deadline(self, run: EstimationRun) -> dict[str, Any] | None:
        return run_deadline_json(run)

    class Meta:
        model = EstimationRun
        fields = [
            "id",
            "scenario",
            "scenario_name",
            "project",
            "status",
            "state",
            "state_message",
            "memory_verdict",
            "dispatched_at",
            "heartbeat_at",
            "progress",
            "progress_message",
            "error",
            "attempts",
            "seed",
            "samples",
            "inputs",
            "price",
            "estimator_version",
            "result",
            "montecarlo",
            "budget",
            "levers",
            "sensitivity",
            "created_by",
            "created_at",
            "started_at",
            "finished_at",
            "deadline",
        ]


class RunStartInput(StorableInput):
    seed = serializers.IntegerField(
        required=False, allow_null=True, help_text="Monte Carlo seed; random when omitted"
    )
    samples = serializers.IntegerField(required=False, help_text="Monte Carlo samples")


# --- Comparisons ----------------------------------------------------------------------------


class ComparisonInput(StorableInput):
    storage_model = Comparison

    project = ScopedPrimaryKeyField(Project, selectors.projects_for)
    name = serializers.CharField(max_length=200)
    scenarios = ScopedPrimaryKeyField(Scenario, selectors.scenarios_for, many=True)


class ComparisonOutput(serializers.ModelSerializer):
    class Meta:
        model = Comparison
        fields = ["id", "project", "name", "scenarios", "created_by", "created_at"]


class ComparisonRowOutput(serializers.Serializer):
    """One scenario's figures from its latest successful run (nulls before it has one)."""

    scenario = serializers.IntegerField(source="scenario.pk")
    scenario_name = serializers.CharField(source="scenario.name")
    accelerator = serializers.CharField(source="scenario.accelerator_id")
    num_gpus = serializers.IntegerField(source="scenario.num_gpus")
    run = serializers.IntegerField(source="run.pk", allow_null=True)
    mfu = serializers.FloatField(source="result.mfu", allow_null=True)
    tokens_per_s = serializers.FloatField(source="result.tokens_per_s", allow_null=True)
    training_days_p50 = serializers.FloatField(source="days_p50", allow_null=True)
    gpu_hours_p50 = serializers.CharField(source="budget.gpu_hours.p50", allow_null=True)
    cost_currency = serializers.CharField(allow_blank=True)
    cost_p10 = money_field(allow_null=True)
    cost_p50 = money_field(allow_null=True)
    cost_p90 = money_field(allow_null=True)
    requested = money_field(
        allow_null=True, help_text="The budget a request on the run asks by default"
    )
    tokens_per_s_per_gpu = serializers.FloatField(
        source="result.tokens_per_s_per_gpu", allow_null=True
    )
    layout = serializers.JSONField(source="result.parallelism", allow_null=True)
    deadline = serializers.SerializerMethodField(help_text=DEADLINE_HELP)
    cheapest = serializers.BooleanField(help_text="Lowest P50 cost of the compared scenarios")
    fastest = serializers.BooleanField(help_text="Fewest P50 days of the compared scenarios")

    @extend_schema_field(serializers.DictField(allow_null=True))
    def get_deadline(self, row: ComparisonRow) -> dict[str, Any] | None:
        return run_deadline_json(row.run, project=row.scenario.project) if row.run else None


class ComparisonDetailOutput(ComparisonOutput):
    currency = serializers.CharField(source="project.organisation.base_currency", read_only=True)
    rows = serializers.SerializerMethodField()

    class Meta(ComparisonOutput.Meta):
        fields = [*ComparisonOutput.Meta.fields, "currency", "rows"]

    @extend_schema_field(ComparisonRowOutput(many=True))
    def get_rows(self, comparison: Comparison) -> list[dict[str, Any]]:
        rows: list[ComparisonRow] = selectors.comparison_rows(
            comparison.scenarios.all(), comparison.project.organisation.base_currency
        )
        return list(ComparisonRowOutput(rows, many=True).data)
