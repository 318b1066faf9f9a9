"""The scenario form: every field of the contract a planner sets by hand, plus its price.

:class:`ScenarioForm` turns its fields into a scenario dict in the contract's format
(``shared/scenario-format.md``); the estimator validates it inside ``scenario_create``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from django import forms

from estimator.core import schema
from estimator.core.catalog import load_catalog
from estimator.core.presets import load_presets, load_recipes, recipe_scenario
from planner.common.forms import (
    DateField,
    choice_field,
    preset_label,
    quantity_format,
    tokens_parse,
)
from planner.common.labels import OFFLOAD_MODES, OPTIMIZERS
from planner.scenarios.forms.fields import (
    CUSTOM,
    FRAMEWORKS,
    LAYOUT_FIELDS,
    MEASURED_KINDS,
    MODEL_FIELDS,
    PRECISIONS,
    RECOMPUTE,
    RECOMPUTE_INITIAL,
    ZERO_STAGE_INITIAL,
    ZERO_STAGES,
    key_field,
    labelled,
)
from planner.scenarios.forms.finetuning import (
    DEFAULT_LORA_RANK,
    LORA_TARGETS,
    TRAINING_METHODS,
    TRAINING_OPTION_KEYS,
    lora_target_choices,
    training_options_initial,
    training_options_spec,
)
from planner.scenarios.forms.prices import OptionAttrsSelect, price_choices, price_value
from planner.scenarios.models import Scenario
from planner.scenarios.prices import PriceObject, price_key_parse
from pricing import selectors as pricing_selectors


class ScenarioForm(forms.Form):
    """Every scenario field of the contract the planners set by hand, plus its price."""

    name = forms.CharField(max_length=200)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    model_preset = forms.ChoiceField(label="Model")
    model_name = forms.CharField(required=False, max_length=200, label="Model name")
    num_layers = key_field("model.num_layers", label="Layers")
    hidden_size = key_field("model.hidden_size", label="Hidden size")
    num_attention_heads = key_field("model.num_attention_heads", label="Attention heads")
    num_kv_heads = key_field("model.num_kv_heads", label="KV heads")
    ffn_hidden_size = key_field("model.ffn_hidden_size", label="FFN hidden size")
    vocab_size = key_field("model.vocab_size", label="Vocabulary size")
    gated_mlp = forms.BooleanField(required=False, label="Gated MLP (SwiGLU)")
    tied_embeddings = forms.BooleanField(required=False, label="Tied embeddings")
    seq_len = key_field("model.seq_len", label="Sequence length")
    tokens = forms.CharField(
        required=False, label="Tokens to train", help_text="e.g. 2T, 300B or 2e12"
    )
    global_batch_size = key_field("training.global_batch_size", label="Global batch size")
    precision = forms.ChoiceField(choices=PRECISIONS, initial="bf16")
    training_method = forms.ChoiceField(
        choices=TRAINING_METHODS, initial=schema.default("training.method.type"),
        required=False, label="Training method",
    )  # fmt: skip
    lora_rank = key_field("training.method.rank", initial=DEFAULT_LORA_RANK, label="LoRA rank")
    lora_targets = forms.ChoiceField(
        choices=LORA_TARGETS, initial="both", required=False, label="LoRA targets",
        help_text=schema.key("training.method.targets").help,
    )  # fmt: skip
    frozen_layers = key_field(
        "training.method.frozen_layers",
        initial=schema.default("training.method.frozen_layers"),
        label="Frozen layers",
    )
    frozen_embeddings = forms.BooleanField(
        required=False, label="Frozen embeddings",
        help_text=schema.key("training.method.frozen_embeddings").help,
    )  # fmt: skip
    optimizer = forms.ChoiceField(
        choices=labelled("training.optimizer", dict(OPTIMIZERS)),
        initial=schema.default("training.optimizer"), required=False, label="Optimizer",
    )  # fmt: skip
    offload = forms.ChoiceField(
        choices=labelled("training.offload", dict(OFFLOAD_MODES)),
        initial=schema.default("training.offload"), required=False, label="CPU offload",
        help_text=schema.key("training.offload").help,
    )  # fmt: skip
    accelerator = forms.ChoiceField()
    num_gpus = key_field("cluster.num_gpus", required=True, label="Number of GPUs")
    parallelism_mode = forms.ChoiceField(
        choices=(("auto", "Auto: the fastest layout that fits"), ("manual", "Explicit layout")),
        initial="auto",
        widget=forms.RadioSelect,
        label="Parallelism",
    )
    framework = forms.ChoiceField(
        choices=FRAMEWORKS,
        initial=schema.default("framework"),
        required=False,
        label="Framework",
        help_text="What the layout search may use, and the software stack whose measured "
        "speed the estimate assumes; auto: the first that runs the scenario (Megatron-LM on "
        "GPUs, MaxText on TPUs, Hugging Face PEFT for QLoRA; fp16 on an NVIDIA GPU with "
        "bf16: the 2021-22 stacks without FlashAttention, sharded when nothing fits "
        "unsharded) at the median speed of the calibrated stacks, its band widened by the "
        "spread between them",
    )
    tp = key_field("parallelism.tp", label="TP")
    pp = key_field("parallelism.pp", label="PP")
    dp = key_field("parallelism.dp", label="DP", help_text="Blank: GPUs / (TP x PP x CP)")
    cp = key_field("parallelism.cp", label="CP")
    ep = key_field("parallelism.ep", label="EP")
    micro_batch_size = key_field("parallelism.micro_batch_size", label="Micro batch")
    zero_stage = forms.ChoiceField(
        choices=ZERO_STAGES, initial=str(ZERO_STAGE_INITIAL), required=False,
        label="ZeRO stage", help_text=schema.key("parallelism.zero_stage").help,
    )  # fmt: skip
    recompute = forms.ChoiceField(
        choices=RECOMPUTE, initial=RECOMPUTE_INITIAL, required=False,
        label="Recompute",
    )  # fmt: skip
    framework_overhead = key_field(
        "margins.framework_overhead",
        required=True,
        initial=schema.default("margins.framework_overhead"),
        label="Overhead margin",
    )
    network_jitter = key_field(
        "margins.network_jitter",
        required=True,
        initial=schema.default("margins.network_jitter"),
        label="Network jitter",
    )
    pue = forms.DecimalField(
        max_digits=4, decimal_places=2, initial=Decimal("1.20"), label="PUE",
        help_text="Data-centre power usage effectiveness, for the energy figure",
    )  # fmt: skip
    utilisation_low = forms.DecimalField(
        max_digits=4, decimal_places=3, initial=Decimal("0.900"), label="Utilisation from"
    )
    utilisation_high = forms.DecimalField(
        max_digits=4, decimal_places=3, initial=Decimal("1.000"), label="to",
        help_text="Share of wall clock the job really runs (Monte Carlo range)",
    )  # fmt: skip
    price = forms.ChoiceField(label="Price source")
    measured_kind = forms.ChoiceField(
        choices=MEASURED_KINDS,
        required=False,
        label="Measured speed",
        help_text="From a short profiled run of this scenario: the estimate is rescaled to it",
    )
    measured_value = forms.FloatField(required=False, min_value=0, label="Measured value")
    measured_on = DateField(required=False, label="Measured on")
    storage_read_gbps = forms.FloatField(
        required=False, min_value=0, label="Storage reads per node (Gbit/s)",
        help_text="Optional: what the storage delivers to one node; warns if the run needs more",
    )  # fmt: skip
    cpu_tokens_per_s = forms.IntegerField(
        required=False, min_value=1, label="CPU tokens/s per node",
        help_text="Optional: what one node's data loaders prepare; warns if the run needs more",
    )  # fmt: skip

    #: Where a service's error about a key of the scenario or of the scenario row shows.
    ERROR_FIELDS = {
        "spec.model.name": "model_name",
        "spec.model.gated_mlp": "gated_mlp",
        "spec.model.tied_embeddings": "tied_embeddings",
        "spec.model.seq_len": "seq_len",
        "spec.training.tokens": "tokens",
        "spec.training.global_batch_size": "global_batch_size",
        "spec.training.precision": "precision",
        "spec.training.method": "training_method",
        "spec.training.method.type": "training_method",
        "spec.training.method.rank": "lora_rank",
        "spec.training.method.targets": "lora_targets",
        "spec.training.method.frozen_layers": "frozen_layers",
        "spec.training.method.frozen_embeddings": "frozen_embeddings",
        "spec.training.optimizer": "optimizer",
        "spec.training.offload": "offload",
        "spec.cluster.accelerator": "accelerator",
        "spec.cluster.num_gpus": "num_gpus",
        "spec.parallelism": "parallelism_mode",
        "spec.parallelism.zero_stage": "zero_stage",
        "spec.parallelism.recompute": "recompute",
        "spec.margins.framework_overhead": "framework_overhead",
        "spec.margins.network_jitter": "network_jitter",
        "price_source": "price",
        "price_entry": "price",
        "vendor_quote": "price",
        "onprem_profile": "price",
        "utilisation_high": "utilisation_low",
        "spec.measurement": "measured_kind",
        **{f"spec.measurement.{kind}": "measured_value" for kind, _ in MEASURED_KINDS if kind},
        "spec.measurement.measured_on": "measured_on",
        **{f"spec.model.{name}": name for name in MODEL_FIELDS},
        **{f"spec.parallelism.{name}": name for name in LAYOUT_FIELDS},
    }

    def __init__(self, *args: Any, base_spec: Mapping[str, Any] | None = None, **kw: Any) -> None:
        current = kw.pop("current_price", None)
        organisation = kw.pop("organisation", None)  # whose prices the picker offers
        super().__init__(*args, **kw)
        self.base_spec = copy.deepcopy(dict(base_spec or {}))
        self.presets = load_presets()
        choice_field(self, "lora_targets").choices = lora_target_choices(self._base_training())
        choice_field(self, "model_preset").choices = [
            *((p.id, preset_label(p)) for p in self.presets.values()),
            (CUSTOM, "Custom architecture…"),
        ]
        catalog = load_catalog()
        choice_field(self, "accelerator").choices = [
            (a.catalog_id, f"{a.name} ({a.catalog_id})")
            for a in pricing_selectors.accelerator_list().order_by("vendor", "name")
            if a.catalog_id in catalog or a.catalog_id == self.initial.get("accelerator")
        ]
        self.price_groups = price_choices(organisation=organisation, current=current)
        # The widget first: assigning a field's choices hands them to its current widget.
        self.fields["price"].widget = OptionAttrsSelect(
            option_attrs={
                c.value: {"data-accelerator": c.accelerator}
                for options in self.price_groups.values()
                for c in options
            }
        )
        choice_field(self, "price").choices = [("", "Choose a price…")] + [
            (group, [(c.value, c.label) for c in options])
            for group, options in self.price_groups.items()
            if options
        ]

    def error_field(self, field: str | None) -> str | None:
        return self.ERROR_FIELDS.get(field or "", field)

    @classmethod
    def initial_for_preset(cls, preset_id: str = "llama3-8b") -> dict[str, Any]:
        preset = load_presets()[preset_id]
        return {
            "model_preset": preset.id,
            "seq_len": preset.model["seq_len"],
            "tokens": quantity_format(preset.training["tokens"]),
            "global_batch_size": preset.training["global_batch_size"],
            "precision": preset.training["precision"],
            "accelerator": "H100-SXM",
            "num_gpus": 64,
            **_model_initial(preset.model),
        }

    @classmethod
    def initial_for_recipe(cls, recipe_id: str) -> dict[str, Any]:
        """The form filled from a fine-tuning recipe (its name too); the price is left open."""
        recipe = load_recipes()[recipe_id]
        return {
            "name": recipe.name,
            **_spec_initial(recipe_scenario(recipe), recipe.model_preset),
        }

    @classmethod
    def initial_for_new(cls, recipe_id: str = "") -> dict[str, Any]:
        """A new scenario's form: from the recipe ``recipe_id`` if one has it, else a preset's."""
        if recipe_id in load_recipes():
            return cls.initial_for_recipe(recipe_id)
        return cls.initial_for_preset()

    @classmethod
    def initial_from(cls, scenario: Scenario) -> dict[str, Any]:
        return {
            "name": scenario.name,
            "description": scenario.description,
            "pue": scenario.pue,
            "utilisation_low": scenario.utilisation_low,
            "utilisation_high": scenario.utilisation_high,
            "price": price_value(scenario),
            **_spec_initial(scenario.spec, scenario.model_preset),
        }

    # -- cleaning ---------------------------------------------------------------------------

    def clean_tokens(self) -> float | None:
        return tokens_parse(self.cleaned_data.get("tokens") or "")

    def clean_price(self) -> tuple[str, PriceObject] | None:
        value = self.cleaned_data.get("price") or ""
        for options in self.price_groups.values():
            for choice in options:
                if choice.value == value:
                    source, _ = price_key_parse(value)
                    return source, choice.price
        raise forms.ValidationError("Choose where the price per GPU-hour comes from.")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("model_preset") == CUSTOM:
            for name in ("num_layers", "hidden_size", "num_attention_heads", "vocab_size"):
                if not data.get(name) and name not in self.errors:
                    self.add_error(name, "Required for a custom architecture.")
            for name in ("seq_len", "tokens", "global_batch_size"):
                if not data.get(name) and name not in self.errors:
                    self.add_error(name, "Required for a custom architecture.")
        if data.get("parallelism_mode") == "manual":
            for name in ("tp", "pp", "micro_batch_size"):
                if not data.get(name) and name not in self.errors:
                    self.add_error(name, "Required for an explicit layout.")
        unvalued = data.get("measured_kind") and data.get("measured_value") is None
        if unvalued and "measured_value" not in self.errors:
            self.add_error("measured_value", "Give the value that was measured.")
        return data

    # -- the scenario ------------------------------------------------------------------------

    @property
    def preset_id(self) -> str:
        chosen = self.cleaned_data["model_preset"]
        return "" if chosen == CUSTOM else str(chosen)

    def _model(self) -> dict[str, Any]:
        data = self.cleaned_data
        preset = self.presets.get(self.preset_id)
        if preset is not None:
            model = copy.deepcopy(preset.model)
        else:
            model = copy.deepcopy(self.base_spec.get("model") or {})
            model["name"] = data.get("model_name") or model.get("name") or "Custom model"
            for name in MODEL_FIELDS:
                if data.get(name):
                    model[name] = data[name]
                elif name in ("num_kv_heads", "ffn_hidden_size"):
                    model.pop(name, None)
            model["gated_mlp"] = bool(data.get("gated_mlp"))
            model["tied_embeddings"] = bool(data.get("tied_embeddings"))
        if data.get("seq_len"):
            model["seq_len"] = data["seq_len"]
        return model

    def _training(self) -> dict[str, Any]:
        data = self.cleaned_data
        preset = self.presets.get(self.preset_id)
        defaults = dict(preset.training) if preset else {}
        defaults.pop("notes", None)
        # Keys the form does not show (fp8_recipe, master_weights) stay as the JSON has them.
        kept = {
            key: value
            for key, value in self._base_training().items()
            if key not in TRAINING_OPTION_KEYS
        }
        return {
            **kept,
            "tokens": data.get("tokens") or defaults.get("tokens"),
            "global_batch_size": data.get("global_batch_size") or defaults.get("global_batch_size"),
            "precision": data["precision"],
            **training_options_spec(data, self._base_training()),
        }

    def _base_training(self) -> dict[str, Any]:
        return dict(self.base_spec.get("training") or {})

    def _parallelism(self, num_gpus: int) -> str | dict[str, Any]:
        data = self.cleaned_data
        if data["parallelism_mode"] == "auto":
            return "auto"
        base = self.base_spec.get("parallelism")
        layout: dict[str, Any] = copy.deepcopy(base) if isinstance(base, dict) else {}
        for name in ("tp", "pp", "micro_batch_size"):
            layout[name] = data[name]
        for name in ("cp", "ep"):
            layout[name] = data.get(name) or schema.default(f"parallelism.{name}")
        split = layout["tp"] * layout["pp"] * layout["cp"]
        layout["dp"] = data.get("dp") or max(num_gpus // split, 1)
        layout["zero_stage"] = int(data.get("zero_stage") or ZERO_STAGE_INITIAL)
        layout["recompute"] = data.get("recompute") or RECOMPUTE_INITIAL
        return layout

    def spec(self) -> dict[str, Any]:
        """The scenario in the contract's format, built on the scenario being edited."""
        data = self.cleaned_data
        cluster = dict(self.base_spec.get("cluster") or {})
        if cluster.get("accelerator") != data["accelerator"]:
            cluster.pop("accelerator_spec", None)
        cluster.update(accelerator=data["accelerator"], num_gpus=data["num_gpus"])
        # The measurement and the pipeline figures are the form's own fields: what the
        # edited scenario had of them is replaced (or dropped when emptied).
        kept = {
            key: value
            for key, value in self.base_spec.items()
            if key not in ("measurement", "data_pipeline")
        }
        return {
            **kept,
            "format_version": 1,
            "model": self._model(),
            "training": self._training(),
            "cluster": cluster,
            "parallelism": self._parallelism(data["num_gpus"]),
            **self._framework(),
            "margins": {
                "framework_overhead": data["framework_overhead"],
                "network_jitter": data["network_jitter"],
            },
            **self._measurement(),
            **self._data_pipeline(),
        }

    def _measurement(self) -> dict[str, Any]:
        """``measurement`` from the measured-speed fields; none when they are empty."""
        data = self.cleaned_data
        kind, value = data.get("measured_kind"), data.get("measured_value")
        if not kind or value is None:
            return {}
        measured: dict[str, Any] = {kind: value}
        if data.get("measured_on"):
            measured["measured_on"] = data["measured_on"].isoformat()
        return {"measurement": measured}

    def _data_pipeline(self) -> dict[str, Any]:
        """``data_pipeline``: the stated figures the input pipeline is checked against."""
        data = self.cleaned_data
        stated = {
            key: data[field]
            for key, field in (
                ("read_gbps_per_node", "storage_read_gbps"),
                ("cpu_tokens_per_s_per_node", "cpu_tokens_per_s"),
            )
            if data.get(field) is not None
        }
        return {"data_pipeline": stated} if stated else {}

    def _framework(self) -> dict[str, Any]:
        """The ``framework`` key, left out for the default "auto" (as the contract's)."""
        default = schema.default("framework")
        chosen = self.cleaned_data.get("framework") or default
        return {} if chosen == default else {"framework": chosen}

    def service_arguments(self) -> dict[str, Any]:
        """Keyword arguments shared by ``scenario_create`` and ``scenario_update``."""
        data = self.cleaned_data
        source, price = data["price"]
        return {
            "name": data["name"],
            "description": data.get("description", ""),
            "model_preset": self.preset_id,
            "spec": self.spec(),
            "price_source": source,
            "price": price,
            "pue": data["pue"],
            "utilisation_low": data["utilisation_low"],
            "utilisation_high": data["utilisation_high"],
        }


def _spec_initial(spec: Mapping[str, Any], model_preset: str) -> dict[str, Any]:
    """The form's fields for a scenario in the contract's format (its row's fields aside)."""
    layout = spec["parallelism"]
    margins = {**schema.defaults("margins"), **spec.get("margins", {})}
    initial: dict[str, Any] = {
        "model_preset": preset_matching(spec["model"], model_preset) or CUSTOM,
        "seq_len": spec["model"]["seq_len"],
        "tokens": quantity_format(float(spec["training"]["tokens"])),
        "global_batch_size": spec["training"]["global_batch_size"],
        "precision": spec["training"]["precision"],
        "accelerator": spec["cluster"]["accelerator"],
        "num_gpus": spec["cluster"]["num_gpus"],
        "parallelism_mode": "auto" if layout == "auto" else "manual",
        "framework": spec.get("framework", schema.default("framework")),
        "framework_overhead": margins["framework_overhead"],
        "network_jitter": margins["network_jitter"],
        **_model_initial(spec["model"]),
        **training_options_initial(spec["training"]),
        **_measurement_initial(spec),
    }
    if isinstance(layout, dict):
        initial.update({key: layout.get(key) for key in LAYOUT_FIELDS})
        initial["zero_stage"] = str(layout.get("zero_stage", ZERO_STAGE_INITIAL))
        initial["recompute"] = layout.get("recompute", RECOMPUTE_INITIAL)
    return initial


def _measurement_initial(spec: Mapping[str, Any]) -> dict[str, Any]:
    measured = spec.get("measurement") or {}
    pipeline = spec.get("data_pipeline") or {}
    kind = next((k for k, _ in MEASURED_KINDS if k and k in measured), "")
    return {
        "measured_kind": kind,
        "measured_value": measured.get(kind) if kind else None,
        "measured_on": measured.get("measured_on"),
        "storage_read_gbps": pipeline.get("read_gbps_per_node"),
        "cpu_tokens_per_s": pipeline.get("cpu_tokens_per_s_per_node"),
    }


def _model_initial(model: Mapping[str, Any]) -> dict[str, Any]:
    initial = {name: model.get(name) for name in MODEL_FIELDS}
    initial.update(
        model_name=model.get("name", ""),
        gated_mlp=bool(model.get("gated_mlp")),
        tied_embeddings=bool(model.get("tied_embeddings")),
    )
    return initial


def preset_matching(model: Mapping[str, Any], preset_id: str) -> str:
    """``preset_id`` when ``model`` is that preset's (sequence length aside), else ``""``."""
    preset = load_presets().get(preset_id)
    if preset is None:
        return ""
    same = {**preset.model, "seq_len": model.get("seq_len")} == dict(model)
    return preset_id if same else ""


def presets_for_page() -> dict[str, dict[str, Any]]:
    """What the scenario page's script fills in when a preset is chosen."""
    return {
        preset.id: {
            "seq_len": preset.model["seq_len"],
            "tokens": quantity_format(preset.training["tokens"]),
            "global_batch_size": preset.training["global_batch_size"],
            "precision": preset.training["precision"],
            "model": preset.model,
            "source": preset.source,
            "notes": preset.notes,
        }
        for preset in load_presets().values()
    }


def recipes_for_page() -> dict[str, dict[str, Any]]:
    """What the scenario page's recipe picker fills in: each recipe's form fields and notes."""
    return {
        recipe.id: {
            "name": recipe.name,
            "fields": ScenarioForm.initial_for_recipe(recipe.id),
            "source": recipe.source,
            "notes": recipe.notes,
        }
        for recipe in load_recipes().values()
    }
