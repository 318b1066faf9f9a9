"""Forms of the planner pages: they parse input; services decide and write.

:class:`ScenarioForm` turns its fields into a scenario dict in the contract's format
(``shared/scenario-format.md``); the estimator validates it inside ``scenario_create``.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any

from django import forms
from django.core.files.uploadedfile import UploadedFile
from django.utils import timezone

from estimator.core.catalog import load_catalog
from estimator.core.presets import ModelPreset, load_presets
from planner.errors import PlannerError
from planner.models import Organisation, Scenario
from pricing import selectors as pricing_selectors
from pricing.currency import currency_code_check
from pricing.errors import PricingError
from pricing.models import OnPremProfile, PriceBook, PriceEntry, VendorQuote

CUSTOM = "custom"
PRECISIONS = (("bf16", "BF16"), ("fp16", "FP16"), ("fp8", "FP8"), ("fp32", "FP32 / TF32"))
RECOMPUTE = (("none", "None"), ("selective", "Selective"), ("full", "Full"))
ZERO_STAGES = (
    ("0", "0 (none)"),
    ("1", "1 (optimizer states)"),
    ("2", "2 (+ gradients)"),
    ("3", "3 (+ weights, FSDP)"),
)
MODEL_FIELDS = (
    "num_layers",
    "hidden_size",
    "num_attention_heads",
    "num_kv_heads",
    "ffn_hidden_size",
    "vocab_size",
)
LAYOUT_FIELDS = ("tp", "pp", "dp", "cp", "ep", "micro_batch_size")
MAX_UPLOAD_BYTES = 1_000_000
MAX_TOKENS = 1e18  # the estimator's own limit
_SUFFIXES = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12, "p": 1e15}
PriceObject = PriceEntry | VendorQuote | OnPremProfile


def quantity_parse(text: str) -> float:
    """``"2T"``, ``"300B"``, ``"2e12"`` or ``"2,000,000"`` as a float; ValueError otherwise."""
    cleaned = text.strip().replace(",", "").replace("_", "").replace(" ", "")
    match = re.fullmatch(r"([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)([kmbgtp]?)", cleaned.lower())
    if not match:
        raise ValueError(text)
    number, suffix = match.groups()
    return float(number) * _SUFFIXES.get(suffix, 1.0)


def quantity_format(value: float) -> str:
    """``1.5e13`` as ``15T``: the inverse of :func:`quantity_parse`, exact when it can be."""
    for suffix, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        scaled = value / scale
        if scaled >= 1 and quantity_parse(f"{scaled:g}{suffix}") == value:
            return f"{scaled:g}{suffix}"
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def tokens_parse(text: str) -> float | None:
    """A tokens field: blank is None (the preset's figure), else a positive quantity."""
    if not text.strip():
        return None
    try:
        tokens = quantity_parse(text)
    except ValueError:
        raise forms.ValidationError("Write a number of tokens such as 2T, 300B or 2e12.") from None
    if not 1 <= tokens <= MAX_TOKENS:
        raise forms.ValidationError(f"Train on between 1 and {MAX_TOKENS:.0e} tokens.")
    return tokens


def planner_error_add(form: forms.Form, error: PlannerError) -> None:
    """Show a service's refusal on the form field it names, else above the form.

    Errors about the scenario JSON (``spec.<key>``) already start with ``<key>: ``; on a
    field of its own that prefix is dropped, above the form it stays, written as the form
    calls that part of the document (``spec_prefix``).
    """
    key = error.field or ""
    inner = key.removeprefix("spec.")
    names_key = key.startswith("spec.") and error.message.startswith(f"{inner}: ")
    target = form.error_field(key) if hasattr(form, "error_field") else key
    if target and target in form.fields:
        message = error.message[len(inner) + 2 :] if names_key and target != "spec" else None
        form.add_error(target, message or error.message)
    elif names_key:
        form.add_error(None, getattr(form, "spec_prefix", "") + error.message)
    else:
        form.add_error(None, f"{key}: {error.message}" if key else error.message)


# --- Projects -------------------------------------------------------------------------------


class DateInput(forms.DateInput):
    input_type = "date"


class ProjectForm(forms.Form):
    organisation = forms.ModelChoiceField(queryset=Organisation.objects.none(), empty_label=None)
    name = forms.CharField(max_length=200)
    goal = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="What the model is for and what done looks like.",
    )
    deadline = forms.DateField(required=False, widget=DateInput, help_text="Training must end by")
    budget_ceiling = forms.DecimalField(
        required=False, max_digits=18, decimal_places=2, help_text="The most finance will sign off"
    )
    currency = forms.CharField(
        max_length=3, initial="USD", widget=forms.TextInput(attrs={"list": "currencies"})
    )

    def __init__(self, *args: Any, organisations: Iterable[Organisation], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        allowed = [organisation.pk for organisation in organisations]
        field = self.fields["organisation"]
        assert isinstance(field, forms.ModelChoiceField)
        field.queryset = Organisation.objects.filter(pk__in=allowed)

    def clean_currency(self) -> str:
        return str(self.cleaned_data["currency"]).strip().upper()


# --- Scenarios ------------------------------------------------------------------------------


class OptionAttrsSelect(forms.Select):
    """A select whose options carry data attributes (the page filters prices by accelerator)."""

    def __init__(self, *args: Any, option_attrs: Mapping[str, dict[str, str]], **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.option_attrs = option_attrs

    def create_option(self, name: str, value: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        option = super().create_option(name, value, *args, **kwargs)
        option["attrs"].update(self.option_attrs.get(str(value), {}))
        return option


@dataclass(frozen=True)
class PriceChoice:
    value: str
    label: str
    accelerator: str
    price: PriceObject


def _money(amount: Decimal, currency: str) -> str:
    """``3.43088125`` as ``3.4309 USD/GPU-h``, ``2.9500`` as ``2.95 USD/GPU-h``."""
    text = f"{amount:,.4f}"
    return f"{text[:-2] if text.endswith('00') else text} {currency}/GPU-h"


def price_choices(*, current: PriceObject | None = None) -> dict[str, list[PriceChoice]]:
    """Published price-book entries, quotes valid today and on-prem profiles, by group."""
    today = timezone.localdate()
    entries = pricing_selectors.price_entries_published().order_by(
        "accelerator__catalog_id", "price_per_accelerator_hour"
    )
    groups: dict[str, list[PriceChoice]] = {"Price books": [], "Vendor quotes": [], "On-prem": []}
    for entry in entries:
        flag = " — flagged: " + entry.data_flag.split(":")[0] if entry.data_flag else ""
        label = (
            f"{_money(entry.price_per_accelerator_hour, entry.book.currency)} · "
            f"{entry.provider.name} {entry.region}, {entry.get_pricing_type_display()} "
            f"[{entry.accelerator.catalog_id}]{flag}"
        )
        groups["Price books"].append(
            PriceChoice(f"price_entry:{entry.pk}", label, entry.accelerator.catalog_id, entry)
        )
    quotes = list(pricing_selectors.quotes_selectable(on=today))
    if isinstance(current, VendorQuote) and current not in quotes:
        quotes.append(current)
    for quote in quotes:
        state = "" if quote.validity_on(today) == "valid" else " — not valid today"
        label = (
            f"{_money(quote.price_per_accelerator_hour, quote.currency)} · "
            f"{quote.reference or quote.vendor[:40]} (up to {quote.accelerator_count} GPUs, "
            f"until {quote.valid_until:%Y-%m-%d}) [{quote.accelerator.catalog_id}]{state}"
        )
        groups["Vendor quotes"].append(
            PriceChoice(f"vendor_quote:{quote.pk}", label, quote.accelerator.catalog_id, quote)
        )
    for profile in pricing_selectors.onprem_profile_list():
        cost = pricing_selectors.onprem_profile_cost(profile=profile).price_per_gpu_hour
        accelerator = profile.accelerator.catalog_id if profile.accelerator else ""
        label = f"{_money(cost, profile.currency)} · {profile.name} [{accelerator or 'any'}]"
        groups["On-prem"].append(
            PriceChoice(f"onprem_profile:{profile.pk}", label, accelerator, profile)
        )
    return groups


def price_value(scenario: Scenario) -> str:
    price = scenario.price_entry or scenario.vendor_quote or scenario.onprem_profile
    return f"{scenario.price_source}:{price.pk}" if price is not None else ""


def _preset_label(preset: ModelPreset) -> str:
    billions = preset.published_parameters / 1e9
    return f"{preset.name} ({billions:,.0f} B parameters)"


def _choice_field(form: forms.Form, name: str) -> forms.ChoiceField:
    field = form.fields[name]
    assert isinstance(field, forms.ChoiceField)
    return field


def _integer(required: bool = False, **kwargs: Any) -> forms.IntegerField:
    return forms.IntegerField(required=required, min_value=1, **kwargs)


class ScenarioForm(forms.Form):
    """Every scenario field of the contract the planners set by hand, plus its price."""

    name = forms.CharField(max_length=200)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    model_preset = forms.ChoiceField(label="Model")
    model_name = forms.CharField(required=False, max_length=200, label="Model name")
    num_layers = _integer(label="Layers")
    hidden_size = _integer(label="Hidden size")
    num_attention_heads = _integer(label="Attention heads")
    num_kv_heads = _integer(label="KV heads", help_text="Blank: as many as attention heads")
    ffn_hidden_size = _integer(label="FFN hidden size", help_text="Blank: 4 x hidden size")
    vocab_size = _integer(label="Vocabulary size")
    gated_mlp = forms.BooleanField(required=False, label="Gated MLP (SwiGLU)")
    tied_embeddings = forms.BooleanField(required=False, label="Tied embeddings")
    seq_len = _integer(label="Sequence length", help_text="Tokens per sequence")
    tokens = forms.CharField(
        required=False, label="Tokens to train", help_text="e.g. 2T, 300B or 2e12"
    )
    global_batch_size = _integer(label="Global batch size", help_text="Sequences per step")
    precision = forms.ChoiceField(choices=PRECISIONS, initial="bf16")
    accelerator = forms.ChoiceField()
    num_gpus = _integer(required=True, label="Number of GPUs", max_value=1_000_000)
    parallelism_mode = forms.ChoiceField(
        choices=(("auto", "Auto: the fastest layout that fits"), ("manual", "Explicit layout")),
        initial="auto",
        widget=forms.RadioSelect,
        label="Parallelism",
    )
    tp = _integer(label="TP", help_text="Tensor parallel")
    pp = _integer(label="PP", help_text="Pipeline parallel")
    dp = _integer(label="DP", help_text="Blank: GPUs / (TP x PP x CP)")
    cp = _integer(label="CP", help_text="Context parallel")
    ep = _integer(label="EP", help_text="Expert parallel")
    micro_batch_size = _integer(label="Micro batch")
    zero_stage = forms.ChoiceField(
        choices=ZERO_STAGES, initial="1", required=False, label="ZeRO stage"
    )
    recompute = forms.ChoiceField(
        choices=RECOMPUTE, initial="selective", required=False, label="Recompute"
    )
    framework_overhead = forms.FloatField(
        min_value=0,
        max_value=2,
        initial=0.10,
        label="Overhead margin",
        help_text="Framework overhead: fraction added to step time (0.10)",
    )
    network_jitter = forms.FloatField(
        min_value=0,
        max_value=2,
        initial=0.05,
        label="Network jitter",
        help_text="Fraction added to communication time (0.05)",
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

    #: Where a service's error about a key of the scenario or of the scenario row shows.
    ERROR_FIELDS = {
        "spec.model.name": "model_name",
        "spec.model.gated_mlp": "gated_mlp",
        "spec.model.tied_embeddings": "tied_embeddings",
        "spec.model.seq_len": "seq_len",
        "spec.training.tokens": "tokens",
        "spec.training.global_batch_size": "global_batch_size",
        "spec.training.precision": "precision",
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
        **{f"spec.model.{name}": name for name in MODEL_FIELDS},
        **{f"spec.parallelism.{name}": name for name in LAYOUT_FIELDS},
    }

    def __init__(self, *args: Any, base_spec: Mapping[str, Any] | None = None, **kw: Any) -> None:
        current = kw.pop("current_price", None)
        super().__init__(*args, **kw)
        self.base_spec = copy.deepcopy(dict(base_spec or {}))
        self.presets = load_presets()
        _choice_field(self, "model_preset").choices = [
            *((p.id, _preset_label(p)) for p in self.presets.values()),
            (CUSTOM, "Custom architecture…"),
        ]
        catalog = load_catalog()
        _choice_field(self, "accelerator").choices = [
            (a.catalog_id, f"{a.name} ({a.catalog_id})")
            for a in pricing_selectors.accelerator_list().order_by("vendor", "name")
            if a.catalog_id in catalog or a.catalog_id == self.initial.get("accelerator")
        ]
        self.price_groups = price_choices(current=current)
        # The widget first: assigning a field's choices hands them to its current widget.
        self.fields["price"].widget = OptionAttrsSelect(
            option_attrs={
                c.value: {"data-accelerator": c.accelerator}
                for options in self.price_groups.values()
                for c in options
            }
        )
        _choice_field(self, "price").choices = [("", "Choose a price…")] + [
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
    def initial_from(cls, scenario: Scenario) -> dict[str, Any]:
        spec = scenario.spec
        layout = spec["parallelism"]
        margins = spec.get("margins", {})
        initial: dict[str, Any] = {
            "name": scenario.name,
            "description": scenario.description,
            "model_preset": preset_matching(spec["model"], scenario.model_preset) or CUSTOM,
            "seq_len": spec["model"]["seq_len"],
            "tokens": quantity_format(float(spec["training"]["tokens"])),
            "global_batch_size": spec["training"]["global_batch_size"],
            "precision": spec["training"]["precision"],
            "accelerator": spec["cluster"]["accelerator"],
            "num_gpus": spec["cluster"]["num_gpus"],
            "parallelism_mode": "auto" if layout == "auto" else "manual",
            "framework_overhead": margins.get("framework_overhead", 0.10),
            "network_jitter": margins.get("network_jitter", 0.05),
            "pue": scenario.pue,
            "utilisation_low": scenario.utilisation_low,
            "utilisation_high": scenario.utilisation_high,
            "price": price_value(scenario),
            **_model_initial(spec["model"]),
        }
        if isinstance(layout, dict):
            initial.update({key: layout.get(key) for key in LAYOUT_FIELDS})
            initial["zero_stage"] = str(layout.get("zero_stage", 1))
            initial["recompute"] = layout.get("recompute", "selective")
        return initial

    # -- cleaning ---------------------------------------------------------------------------

    def clean_tokens(self) -> float | None:
        return tokens_parse(self.cleaned_data.get("tokens") or "")

    def clean_price(self) -> tuple[str, PriceObject] | None:
        value = self.cleaned_data.get("price") or ""
        for options in self.price_groups.values():
            for choice in options:
                if choice.value == value:
                    source = value.split(":", 1)[0]
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
        return {
            "tokens": data.get("tokens") or defaults.get("tokens"),
            "global_batch_size": data.get("global_batch_size") or defaults.get("global_batch_size"),
            "precision": data["precision"],
        }

    def _parallelism(self, num_gpus: int) -> str | dict[str, Any]:
        data = self.cleaned_data
        if data["parallelism_mode"] == "auto":
            return "auto"
        base = self.base_spec.get("parallelism")
        layout: dict[str, Any] = copy.deepcopy(base) if isinstance(base, dict) else {}
        for name in ("tp", "pp", "micro_batch_size"):
            layout[name] = data[name]
        layout["cp"], layout["ep"] = data.get("cp") or 1, data.get("ep") or 1
        split = layout["tp"] * layout["pp"] * layout["cp"]
        layout["dp"] = data.get("dp") or max(num_gpus // split, 1)
        layout["zero_stage"] = int(data.get("zero_stage") or 1)
        layout["recompute"] = data.get("recompute") or "selective"
        return layout

    def spec(self) -> dict[str, Any]:
        """The scenario in the contract's format, built on the scenario being edited."""
        data = self.cleaned_data
        cluster = dict(self.base_spec.get("cluster") or {})
        if cluster.get("accelerator") != data["accelerator"]:
            cluster.pop("accelerator_spec", None)
        cluster.update(accelerator=data["accelerator"], num_gpus=data["num_gpus"])
        return {
            **self.base_spec,
            "format_version": 1,
            "model": self._model(),
            "training": self._training(),
            "cluster": cluster,
            "parallelism": self._parallelism(data["num_gpus"]),
            "margins": {
                "framework_overhead": data["framework_overhead"],
                "network_jitter": data["network_jitter"],
            },
        }

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


def _json_load(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise forms.ValidationError(
            f"Not valid JSON: {error.msg} at line {error.lineno}, column {error.colno}."
        ) from None


class ScenarioJsonForm(forms.Form):
    """The scenario JSON itself, for what the form does not cover (MoE, overrides, …)."""

    spec = forms.CharField(
        label="Scenario JSON",
        widget=forms.Textarea(attrs={"rows": 28, "spellcheck": "false", "class": "code"}),
    )

    def error_field(self, field: str | None) -> str | None:
        return "spec" if field and field.startswith("spec") else field

    def clean_spec(self) -> Any:
        return _json_load(self.cleaned_data["spec"])


class ScenarioImportForm(forms.Form):
    """An exported scenario document, uploaded as a file or pasted."""

    file = forms.FileField(required=False, label="JSON file")
    document = forms.CharField(
        required=False,
        label="…or paste the JSON",
        widget=forms.Textarea(attrs={"rows": 14, "spellcheck": "false", "class": "code"}),
    )

    #: The export document holds the scenario JSON under ``scenario``.
    spec_prefix = "scenario."

    def error_field(self, field: str | None) -> str | None:
        return None  # every key of the document is reported above the form, with its name

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        upload: UploadedFile | None = data.get("file")
        text = data.get("document") or ""
        if upload is not None:
            if upload.size is not None and upload.size > MAX_UPLOAD_BYTES:
                raise forms.ValidationError("The file is larger than 1 MB.")
            try:
                text = upload.read().decode("utf-8-sig")
            except UnicodeDecodeError:
                raise forms.ValidationError("The file is not UTF-8 text.") from None
        if not text.strip():
            raise forms.ValidationError("Upload an exported scenario file or paste its JSON.")
        data["parsed"] = _json_load(text)
        _finite_numbers_check(data["parsed"])
        return data


def _finite_numbers_check(document: Any) -> None:
    """Refuse NaN and infinite PUE or utilisation before they reach Decimal comparisons."""
    if not isinstance(document, dict):
        return
    utilisation = document.get("utilisation")
    values = [("pue", document.get("pue"))]
    values += [("utilisation", v) for v in utilisation] if isinstance(utilisation, list) else []
    for key, value in values:
        try:
            finite = value is None or Decimal(str(value)).is_finite()
        except ArithmeticError:
            finite = True  # not a number at all: the service names the key
        if not finite:
            raise forms.ValidationError(f"{key}: must be a finite number, got {value!r}")


# --- Comparisons ----------------------------------------------------------------------------


class ComparisonSaveForm(forms.Form):
    name = forms.CharField(max_length=200, label="Save this comparison as")


# --- Capacity -------------------------------------------------------------------------------

MAX_CAPACITY_GPUS = 16_384


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
    deadline = forms.DateField(widget=DateInput, label="Finish by")
    budget = forms.DecimalField(required=False, max_digits=18, decimal_places=2, min_value=0)
    currency = forms.CharField(max_length=3, initial="USD")
    max_gpus = forms.IntegerField(
        min_value=1,
        max_value=MAX_CAPACITY_GPUS,
        initial=1024,
        label="At most GPUs per option",
        help_text=f"Up to {MAX_CAPACITY_GPUS:,}; quotes are capped at their accelerator count",
    )
    book = forms.ModelChoiceField(
        queryset=PriceBook.objects.none(), required=False, label="Price book", empty_label="None"
    )
    include_spot = forms.BooleanField(required=False, label="Include spot prices")
    include_quotes = forms.BooleanField(required=False, initial=True, label="Valid vendor quotes")
    include_onprem = forms.BooleanField(required=False, initial=True, label="On-prem profiles")

    def __init__(self, *args: Any, scenarios: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _choice_field(self, "model_preset").choices = [("", "—")] + [
            (p.id, _preset_label(p)) for p in load_presets().values()
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
        if deadline <= timezone.localdate():
            raise forms.ValidationError("Pick a date after today.")
        return deadline

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not data.get("model_preset") and not data.get("scenario"):
            self.add_error("model_preset", "Pick a model preset or a scenario.")
        if not (data.get("book") or data.get("include_quotes") or data.get("include_onprem")):
            self.add_error("book", "Pick at least one price source.")
        return data
