"""The scenario schema: every key's default, bounds, unit, allowed values and help, once.

The contract (``shared/scenario-format.md``, format version 1) names the keys; the project
may add keys but never rename or drop one. Each key is one :class:`Key` of :data:`KEYS`, by
its dotted path, and everything else reads it:

* :mod:`estimator.core.scenario` takes its dataclass defaults from :func:`default`;
* :mod:`estimator.core.validation` parses each value with its key's :meth:`Key.integer`,
  :meth:`Key.number`, ... (the messages name the key and the reason, e.g.
  ``model.num_layers: must be a positive integer, got -3``) and allows in each section the
  keys :func:`names` lists;
* the planner's scenario form and API take defaults, bounds and help text from here;
* ``docs/scenario-keys.md`` is rendered from here (:mod:`estimator.core.schema_docs`).

A bound that depends on another key (``training.method.frozen_layers`` at most
``model.num_layers``) is checked by the validator and described by ``maximum_text``.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from estimator.core.errors import ScenarioError
from estimator.core.frameworks import PROFILES


class _Required:
    """The default of a key the scenario must give."""

    def __repr__(self) -> str:
        return "REQUIRED"


#: The default of a required key.
REQUIRED: Final[Any] = _Required()

#: Upper bound for any integer key, far above any real model or cluster.
MAX_INTEGER = 2**40
#: Largest cluster accepted: beyond it the failure model's job MTBF drops below seconds.
MAX_DEVICES = 1_000_000
#: Largest LoRA rank accepted (adapters beyond it stop being low-rank for any model).
MAX_LORA_RANK = 4096

# Bounds on the model's shape and the batch: about an order of magnitude above the largest
# published training runs, so any real or planned model passes while a typo (or an attack)
# that would hold a worker for minutes is refused up front. Largest published figures:
# depth 1,000 layers (DeepNet, Wang et al. 2022; Llama 3 405B has 126), width 25,600
# (Megatron-LM's 1T config; PaLM 540B 18,432), MLP width 73,728 (PaLM), 160 heads (1T),
# 384 experts (Kimi K2; DeepSeek-V3 256), a 262,144-token vocabulary (Gemma 3), 1M-token
# training sequences (long-context extension) and 16M-token batches (Llama 3: 2,048
# sequences of 8K; 131,072 sequences of 128 tokens).
#: Most transformer layers (and layers counted in any per-layer key).
MAX_LAYERS = 8192
#: Widest residual stream. [elements]
MAX_HIDDEN = 1 << 18
#: Widest MLP, expert, head or latent (the MLP defaults to 4 x the residual stream). [elements]
MAX_WIDTH = 1 << 20
#: Most attention heads, key/value heads or routed experts.
MAX_HEADS = 16384
#: Largest vocabulary. [tokens]
MAX_VOCABULARY = 1 << 24
#: Longest training sequence. [tokens]
MAX_SEQUENCE = 1 << 26
#: Largest global batch. [sequences]
MAX_BATCH = 1 << 24

RECOMPUTE_MODES = ("none", "selective", "full")
PIPELINE_SCHEDULES = ("1f1b", "interleaved")
#: "fp32" is true FP32 matmuls; "tf32" keeps FP32 storage with TF32 tensor-core matmuls.
TRAINING_PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8")
#: fp8 scaling granularity: one scale per tensor (Transformer Engine delayed or current
#: scaling), per row (torchao rowwise) or per block of 32-128 values (MXFP8, DeepSeek-style).
FP8_RECIPES = ("tensorwise", "rowwise", "blockwise")
#: What lives in host memory instead of the accelerator's (ZeRO-Offload, FSDP CPU offload).
OFFLOAD_MODES = ("none", "optimizer", "optimizer_and_params")
#: ``training.method.type``: every weight trained, or low-rank adapters on frozen weights
#: (LoRA, Hu et al. 2021) over 16-bit or 4-bit NF4 base weights (QLoRA, Dettmers et al. 2023).
METHOD_TYPES = ("full", "lora", "qlora")
#: Weight matrices LoRA adapts: the attention projections (Q, K, V, O), the MLP's (gate,
#: up, down), or single projections by their Hugging Face names.
LORA_TARGETS = (
    "attention", "mlp", "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
    "down_proj",
)  # fmt: skip
#: Targets when none are given: every linear layer of the blocks.
DEFAULT_LORA_TARGETS = ("attention", "mlp")
#: ``training.optimizer``: AdamW, 8-bit AdamW (bitsandbytes), Adafactor, SGD with momentum,
#: Lion.
OPTIMIZERS = ("adamw", "adamw8bit", "adafactor", "sgd", "lion")
#: Capacity a run is bought as: spot capacity adds preemptions to the whole run.
CAPACITY_CHOICES = ("dedicated", "spot")
ZERO_STAGES = (0, 1, 2, 3)
#: ``framework``: "auto" or a profile of :mod:`estimator.core.frameworks`.
FRAMEWORKS = ("auto", *PROFILES)

#: Kinds of value whose keys :meth:`Key.parse` checks on their own.
SCALAR_KINDS = ("integer", "number", "boolean", "choice", "text")


def show(value: Any) -> str:
    """``value`` as a message quotes it: JSON's true/false/null, at most 60 characters."""
    text = repr(value) if isinstance(value, str) else str(value).replace("\n", " ")
    text = {"True": "true", "False": "false", "None": "null"}.get(text, text)
    return text if len(text) <= 60 else text[:57] + "..."


def _alternatives(options: tuple[Any, ...]) -> str:
    """``0, 1, 2 or 3``."""
    words = [str(option) for option in options]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def _is_number(value: Any) -> bool:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return ok and math.isfinite(value)


@dataclass(frozen=True)
class Key:
    """One scenario key: what it holds, its default, bounds, unit and help.

    Parameters
    ----------
    path : str
        Dotted path, e.g. ``margins.network_jitter``.
    kind : str
        ``integer``, ``number``, ``boolean``, ``choice``, ``text`` (checked by
        :meth:`parse`), or ``object``, ``list``, ``layout`` (an object or ``"auto"``),
        ``version`` (checked by the validator).
    help : str
        One line for forms, the API and the docs.
    default : object
        The value an absent (or null) key takes; :data:`REQUIRED` when it must be given;
        None when absence means something the estimator works out (``default_text``).
    default_text : str
        How a default that is not a plain value is stated (forms, API, docs).
    minimum, maximum : float, optional
        Bounds (None: unbounded); integers always have a minimum.
    exclusive_minimum, exclusive_maximum : bool
        Whether the bound itself is refused (numbers only).
    maximum_text : str
        A further upper bound that depends on another key, as the docs state it.
    unit : str
        Unit of a quantity, as the code's docstrings write it (``1`` for a share).
    choices : tuple
        The allowed values of a ``choice`` (or an enumerated ``integer``) key.
    """

    path: str
    kind: str
    help: str
    default: Any = REQUIRED
    default_text: str = ""
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False
    maximum_text: str = ""
    unit: str = ""
    choices: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        if self.kind == "integer" and (
            self.minimum is None or self.exclusive_minimum or self.exclusive_maximum
        ):
            raise ValueError(f"{self.path}: an integer key has an inclusive minimum")

    @property
    def name(self) -> str:
        """The last part of the path: the key within its section."""
        return self.path.rpartition(".")[2]

    @property
    def parent(self) -> str:
        """The section's path ("" at the top level)."""
        return self.path.rpartition(".")[0]

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def bounded(self) -> bool:
        """Whether the key is a number with a bound of its own."""
        numeric = self.kind in ("integer", "number")
        return numeric and (self.minimum is not None or self.maximum is not None)

    def within(self, value: float) -> bool:
        """Whether ``value`` lies within the key's own bounds."""
        low, high = self.minimum, self.maximum
        if low is not None and (value <= low if self.exclusive_minimum else value < low):
            return False
        return high is None or not (value >= high if self.exclusive_maximum else value > high)

    def _bound(self, value: float | None, missing: str) -> str:
        if value is None:
            return missing
        return f"{int(value):,}" if self.kind == "integer" else f"{value:g}"

    @property
    def interval(self) -> str:
        """``[0, 10]``, ``(0, 1]``, ``[1, inf)``."""
        low, high = self._bound(self.minimum, "-inf"), self._bound(self.maximum, "inf")
        left = "(" if self.exclusive_minimum or self.minimum is None else "["
        right = ")" if self.exclusive_maximum or self.maximum is None else "]"
        return f"{left}{low}, {high}{right}"

    def _refuse(self, reason: str) -> ScenarioError:
        return ScenarioError(self.path, reason)

    def integer(self, value: Any, maximum: int | None = None) -> int:
        """``value`` as this key's integer; ``maximum`` tightens the key's own bound."""
        low = int(self.minimum or 0)
        if not _is_number(value) or value != int(value) or value < low:
            kind = "a positive integer" if low == 1 else f"an integer >= {low}"
            raise self._refuse(f"must be {kind}, got {show(value)}")
        if self.choices and value not in self.choices:
            raise self._refuse(f"must be {_alternatives(self.choices)}, got {show(int(value))}")
        top = self.maximum if maximum is None else maximum
        if top is not None and value > top:
            raise self._refuse(f"must be at most {int(top):,}, got {show(value)}")
        return int(value)

    def number(self, value: Any) -> float:
        """``value`` as this key's number, within its bounds."""
        if not _is_number(value) or not self.within(value):
            raise self._refuse(f"must be a number in {self.interval}, got {show(value)}")
        return float(value)

    def boolean(self, value: Any) -> bool:
        if not isinstance(value, bool):
            raise self._refuse(f"must be true or false, got {show(value)}")
        return value

    def choice(self, value: Any) -> str:
        if value not in self.choices:
            raise self._refuse(f"must be one of {self.choices}, got {show(value)}")
        return str(value)

    def text(self, value: Any) -> str:
        if not isinstance(value, str):
            raise self._refuse(f"must be a string, got {show(value)}")
        return value

    def parse(self, value: Any) -> Any:
        """``value`` checked against this key alone (kind, bounds, choices).

        Raises
        ------
        ScenarioError
            Naming the key, as the validator does; for kinds the validator checks with the
            rest of the scenario (objects, layouts), nothing is checked here.
        """
        parsers = {
            "integer": self.integer,
            "number": self.number,
            "boolean": self.boolean,
            "choice": self.choice,
            "text": self.text,
        }
        parser = parsers.get(self.kind)
        return value if parser is None else parser(value)

    def values(self, code: Callable[[str], str] = str) -> str:
        """The kind of value with its bounds or choices, in words; ``code`` marks literals."""
        if self.kind == "integer" and self.choices:
            text = _alternatives(self.choices)
        elif self.kind == "integer":
            text = "positive integer" if self.minimum == 1 else f"integer >= {self.minimum:g}"
            if self.maximum is not None and self.maximum < MAX_INTEGER:
                text = f"integer in {self.interval}"
        elif self.kind == "number":
            text = f"number in {self.interval}" if self.bounded else "number"
        elif self.kind == "boolean":
            text = f"{code('true')} / {code('false')}"
        elif self.kind in ("choice", "list"):
            text = ", ".join(code(json.dumps(option)) for option in self.choices)
            text = f"list of {text}" if self.kind == "list" else text
        else:
            kinds = {"layout": f"object, or {code(json.dumps('auto'))}", "version": code("1")}
            text = kinds.get(self.kind, "string" if self.kind == "text" else self.kind)
        return f"{text}, at most {code(self.maximum_text)}" if self.maximum_text else text

    @property
    def default_literal(self) -> str:
        """The default as JSON writes it (``0.05``, ``"adamw"``, ``true``); "" when the key is
        required or its default is not a plain value (``default_text`` says it)."""
        if self.required or self.default is None or self.default_text:
            return ""
        if isinstance(self.default, float):
            return f"{self.default:g}"
        return json.dumps(self.default)

    @property
    def default_shown(self) -> str:
        """The default in words: its JSON literal or ``default_text``; "" when required."""
        if self.required:
            return ""
        return self.default_literal or self.default_text or "absent"

    @property
    def help_text(self) -> str:
        """``help`` with the default, for a form field or an API field."""
        shown = self.default_shown
        return f"{self.help} (default {shown})" if shown else self.help


def _count(path: str, unit: str, help: str, **details: Any) -> Key:
    """An integer key: at least 1 and at most :data:`MAX_INTEGER` unless it says otherwise."""
    return Key(
        path, "integer", help, **{"minimum": 1, "maximum": MAX_INTEGER, **details}, unit=unit
    )


def _share(path: str, help: str, default: float | None, high: float) -> Key:
    """A share in [0, ``high``]."""
    return Key(path, "number", help, default=default, minimum=0.0, maximum=high, unit="1")


def _choice(path: str, choices: tuple[str, ...], help: str, **details: Any) -> Key:
    return Key(path, "choice", help, choices=choices, **details)


def _flag(path: str, help: str, default: bool | None, **details: Any) -> Key:
    return Key(path, "boolean", help, default=default, **details)


def _object(path: str, help: str, **details: Any) -> Key:
    return Key(path, "object", help, **details)


# Keys in the order the docs list them; within a section, the order its "unknown key"
# message lists them. ``default=None``: absent means what ``default_text`` says.
KEYS: tuple[Key, ...] = (
    Key("format_version", "version", "The scenario format's version"),
    # -- model ----------------------------------------------------------------------------
    _object("model", "The decoder-only transformer's shape"),
    Key("model.name", "text", "A name for the model", default="", default_text="none"),
    _count("model.num_layers", "layers", "Transformer layers", maximum=MAX_LAYERS),
    _count("model.hidden_size", "elements", "Width of the residual stream", maximum=MAX_HIDDEN),
    _count("model.num_attention_heads", "heads", "Query heads per layer", maximum=MAX_HEADS),
    _count(
        "model.num_kv_heads", "heads", "Key/value heads per layer; fewer is GQA/MQA",
        default=None, default_text="num_attention_heads", maximum=MAX_HEADS,
    ),
    _count(
        "model.ffn_hidden_size", "elements", "Inner width of the MLP",
        default=None, default_text="4 x hidden_size", maximum=MAX_WIDTH,
    ),
    _flag("model.gated_mlp", "SwiGLU-style MLP (three weight matrices)", False),
    _count("model.vocab_size", "tokens", "Tokens in the vocabulary", maximum=MAX_VOCABULARY),
    _count("model.seq_len", "tokens", "Tokens per sequence", maximum=MAX_SEQUENCE),
    _flag("model.tied_embeddings", "Input and output embeddings share weights", False),
    _object("model.moe", "Mixture of experts", default=None, default_text="absent (dense)"),
    _count(
        "model.moe.num_experts", "experts", "Routed experts per MoE layer", maximum=MAX_HEADS
    ),
    _count("model.moe.top_k", "experts", "Experts each token is routed to", maximum=MAX_HEADS),
    _count(
        "model.moe.expert_ffn_hidden_size", "elements", "Inner width of one expert",
        maximum=MAX_WIDTH,
    ),
    _count(
        "model.moe.num_shared_experts", "experts", "Experts every token passes through",
        minimum=0, default=0, maximum=MAX_HEADS,
    ),
    _count(
        "model.moe.moe_layer_every", "layers", "Every n-th layer is MoE", default=1,
        maximum=MAX_LAYERS,
    ),
    _count(
        "model.moe.first_dense_layers", "layers", "Leading layers that keep a dense MLP",
        minimum=0, default=0, maximum=MAX_LAYERS,
    ),
    _count(
        "model.head_dim", "elements", "Width of one attention head",
        default=None, default_text="hidden_size / num_attention_heads", maximum=MAX_WIDTH,
    ),
    _object(
        "model.mla", "Multi-head latent attention (DeepSeek-V2/V3, Kimi K2)",
        default=None, default_text="absent (standard attention)",
    ),
    _count(
        "model.mla.kv_lora_rank", "elements", "Rank of the shared key/value latent",
        maximum=MAX_WIDTH,
    ),
    _count(
        "model.mla.q_lora_rank", "elements", "Rank of the query latent; 0: full-rank queries",
        minimum=0, default=0, maximum=MAX_WIDTH,
    ),
    _count(
        "model.mla.qk_nope_head_dim", "elements", "Latent-derived query/key head width",
        maximum=MAX_WIDTH,
    ),
    _count(
        "model.mla.qk_rope_head_dim", "elements", "Rotary query/key head width",
        minimum=0, default=0, maximum=MAX_WIDTH,
    ),
    _count("model.mla.v_head_dim", "elements", "Width of one value head", maximum=MAX_WIDTH),
    # -- training -------------------------------------------------------------------------
    _object("training", "What is trained, for how long"),
    Key(
        "training.tokens", "number", "Tokens to train on",
        minimum=1.0, maximum=1e18, unit="tokens",
    ),
    _count(
        "training.global_batch_size", "sequences", "Sequences per optimizer step",
        maximum=MAX_BATCH,
    ),
    _choice("training.precision", TRAINING_PRECISIONS, "Number format of the matmuls"),
    _choice(
        "training.fp8_recipe", FP8_RECIPES, "fp8 scaling granularity (fp8 only)",
        default="tensorwise",
    ),
    _object("training.method", "Full training, LoRA or QLoRA", default={"type": "full"}),
    _choice(
        "training.method.type", METHOD_TYPES, "Every weight trained, or adapters on frozen ones",
        default="full",
    ),
    _count(
        "training.method.rank", "", "LoRA and QLoRA: the adapters' rank r",
        default=16, maximum=MAX_LORA_RANK, maximum_text="model.hidden_size",
    ),
    Key(
        "training.method.targets", "list", "LoRA and QLoRA: the weight matrices that get adapters",
        default=DEFAULT_LORA_TARGETS, choices=LORA_TARGETS,
    ),
    _share("training.method.dropout", "LoRA and QLoRA: dropout on the adapter branch", 0.0, 0.9),
    _count(
        "training.method.frozen_layers", "layers", "Full training: the bottom layers kept fixed",
        minimum=0, default=0, maximum_text="model.num_layers",
    ),
    _flag("training.method.frozen_embeddings", "Full training: embeddings kept fixed", False),
    _choice("training.optimizer", OPTIMIZERS, "The optimizer", default="adamw"),
    _choice(
        "training.offload", OFFLOAD_MODES,
        "What waits in host memory between steps (DeepSpeed ZeRO-Offload style)", default="none",
    ),
    _flag(
        "training.master_weights", "Mixed precision's fp32 master copy; false: pure 16-bit", True
    ),
    # -- cluster --------------------------------------------------------------------------
    _object("cluster", "Where it runs"),
    Key("cluster.accelerator", "text", "A catalog id (see `python -m estimator catalog`)"),
    _count("cluster.num_gpus", "devices", "Accelerators in the cluster", maximum=MAX_DEVICES),
    _count(
        "cluster.gpus_per_node", "devices", "Accelerators per node",
        default=None, default_text="the catalog's",
    ),
    _object(
        "cluster.accelerator_spec", "Catalog fields overridden, or a chip the catalog lacks",
        default=None,
    ),
    _count("cluster.num_slices", "slices", "TPU slices joined over DCN (multislice)", default=1),
    Key(
        "cluster.power_limit_w", "number", "Board power limit per device (nvidia-smi -pl)",
        default=None, default_text="the TDP, no limit", unit="W",
    ),
    # -- parallelism ----------------------------------------------------------------------
    Key("parallelism", "layout", '"auto": the fastest layout that fits, or an explicit one'),
    _count("parallelism.tp", "devices", "Tensor parallel"),
    _count("parallelism.pp", "devices", "Pipeline parallel"),
    _count("parallelism.dp", "devices", "Data parallel"),
    _count("parallelism.cp", "devices", "Context parallel", default=1),
    _count("parallelism.ep", "devices", "Expert parallel", default=1),
    _count("parallelism.micro_batch_size", "sequences", "Sequences per micro-batch"),
    _count(
        "parallelism.zero_stage", "", "ZeRO stage (FSDP full sharding = 3)",
        minimum=0, maximum=max(ZERO_STAGES), choices=ZERO_STAGES,
    ),
    _choice("parallelism.recompute", RECOMPUTE_MODES, "Activation recomputation"),
    _flag(
        "parallelism.sequence_parallel", "Activations split over the tensor-parallel group",
        None, default_text="true when tp > 1 (and the framework has it)",
    ),
    _choice(
        "parallelism.pipeline_schedule", PIPELINE_SCHEDULES, "Pipeline schedule", default="1f1b"
    ),
    _count(
        "parallelism.virtual_stages", "stages", "Model chunks per pipeline stage (interleaved)",
        default=1,
    ),
    _flag(
        "parallelism.activation_offload", "Saved activations copied to host memory and back",
        False,
    ),
    # -- margins, run, top level ----------------------------------------------------------
    _object("margins", "Safety margins", default=None, default_text="the defaults of its keys"),
    _share(
        "margins.framework_overhead", "Framework overhead: fraction added to step time",
        0.10, 10.0,
    ),
    _share(
        "margins.network_jitter",
        "Fraction added to step time at 1,024 GPUs; 0 in one node, up to 2x", 0.05, 10.0,
    ),
    _object("run", "What the whole run spends beyond its steady state", default=None),
    _choice(
        "run.capacity", CAPACITY_CHOICES, "Capacity the run is bought as", default="dedicated"
    ),
    _share("run.evaluation_fraction", "Evaluation as a share of training time", 0.01, 1.0),
    Key(
        "run.allocation_idle", "number", "Share of the allocation held but not training",
        default=None, default_text="the whole-run model's", minimum=0.0, maximum=0.9, unit="1",
    ),
    _choice(
        "framework", FRAMEWORKS,
        "What runs the training, and the software stack whose speed the estimate assumes",
        default="auto",
    ),
    _object("measurement", "A measured speed the estimate is rescaled to", default=None),
    _object("cost", "The price the layout search's cost objective uses", default=None),
    Key(
        "cost.price_per_gpu_hour", "number", "Price of one GPU-hour, in the caller's currency",
        default=None, minimum=0.0, maximum=1e6, unit="currency/h",
    ),
)  # fmt: skip

_BY_PATH: dict[str, Key] = {key.path: key for key in KEYS}


def _names_by_section() -> dict[str, tuple[str, ...]]:
    sections: dict[str, list[str]] = {}
    for k in KEYS:
        sections.setdefault(k.parent, []).append(k.name)
    return {section: tuple(names) for section, names in sections.items()}


# Every validation asks each section's allowed names: built once, KEYS being a tuple.
_NAMES: Final[dict[str, tuple[str, ...]]] = _names_by_section()


def key(path: str) -> Key:
    """The key at a dotted ``path``; KeyError for a path the schema does not know."""
    return _BY_PATH[path]


def default(path: str) -> Any:
    """The default of the key at ``path`` (a copy of a list or object); LookupError when the
    key is required."""
    value = key(path).default
    if value is REQUIRED:
        raise LookupError(f"{path} is required: it has no default")
    return copy.deepcopy(value)


def defaults(section: str) -> dict[str, Any]:
    """``{name: default}`` of a section's keys that have a value as their default."""
    return {
        k.name: copy.deepcopy(k.default)
        for k in KEYS
        if k.parent == section and not k.required and k.default is not None
    }


def names(section: str) -> tuple[str, ...]:
    """The keys a section (``"model"``, ``"training.method"``...) allows, in schema order."""
    return _NAMES.get(section, ())


def summary() -> str:
    """The bounds and defaults of the keys that have more than "positive integer", for help
    texts (the API's ``spec``): ``margins.network_jitter: number in [0, 10], default 0.05``."""
    rules = []
    for k in KEYS:
        if k.default_literal or (k.bounded and k.values() != "positive integer"):
            default = f", default {k.default_literal}" if k.default_literal else ""
            rules.append(f"{k.path}: {k.values()}{default}")
    return "; ".join(rules)


def bounded_keys() -> Iterator[Key]:
    """Every number or integer key with a bound of its own."""
    return (k for k in KEYS if k.bounded)
