"""``docs/scenario-keys.md``, rendered from the scenario schema (:mod:`estimator.core.schema`).

The keys' kinds, bounds, defaults, units and help are the schema's; this module adds the
prose the page wraps them in: the long "meaning" and "where it acts" of the keys the project
adds to the contract (:data:`ADDED`), and the keys the outputs add. ``python -m estimator
schema-docs --write`` rewrites the page; a test fails when the checked-in page differs from
:func:`render`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from estimator.core.schema import KEYS, Key, key

#: Where the rendered page is checked in.
DOC_PATH = Path(__file__).resolve().parents[2] / "docs" / "scenario-keys.md"


@dataclass(frozen=True)
class Documented:
    """The page's row for a key the project adds (or gives a meaning the contract leaves
    open); ``values`` and ``default`` are the schema's unless stated."""

    meaning: str
    acts: str
    values: str = ""
    default: str = ""


#: The keys the project adds to the contract, in the page's order.
ADDED: dict[str, Documented] = {
    "model.head_dim": Documented(
        meaning=(
            "width of one attention head, for models whose query width `num_attention_heads x "
            "head_dim` differs from `hidden_size` (Gemma, Qwen3, many MaxText configs). With it, "
            "`hidden_size` need not divide by the head count."
        ),
        acts=(
            "Q/O projection shapes and parameters, attention FLOPs (`12 l s n_heads d_head` per "
            "token), KV sizes, activations"
        ),
        default="`hidden_size / num_attention_heads`",
    ),
    "model.mla": Documented(
        meaning=(
            "multi-head latent attention (DeepSeek-V2/V3, Kimi K2), keys named as in the Hugging "
            "Face configs. With it `head_dim` is `qk_nope_head_dim + qk_rope_head_dim` (giving "
            "`model.head_dim` too is refused) and `num_kv_heads` must equal "
            "`num_attention_heads`."
        ),
        acts=(
            "attention parameters, projection shapes (down-projections whole on every TP rank), "
            "attention FLOPs `6 l s n_heads (d_qk + d_v)`, activations, ring-attention K/V"
        ),
        values=(
            "object: `kv_lora_rank`, `qk_nope_head_dim`, `v_head_dim` (positive integers), "
            "`qk_rope_head_dim`, `q_lora_rank` (integers >= 0, default 0; 0 rank: a full-rank "
            "query projection)"
        ),
    ),
    "model.moe.first_dense_layers": Documented(
        meaning=(
            "leading layers with a dense MLP of `ffn_hidden_size` (DeepSeek's "
            "`first_k_dense_replace`: 1 in V2, 3 in V3); the MoE layers are every "
            "`moe_layer_every`-th of the rest"
        ),
        acts="parameters, active parameters, MoE share of the step",
    ),
    "training.precision": Documented(
        meaning=(
            '`"fp32"` is now true FP32 (no tensor cores: the catalog\'s FP32 peak); `"tf32"` '
            "keeps FP32 storage with TF32 tensor-core matmuls (the TF32 peak). Both keep 4-byte "
            "weights, gradients and activations."
        ),
        acts="matmul peak, bytes per value",
        values='adds `"tf32"`',
        default="-",
    ),
    "training.fp8_recipe": Documented(
        meaning=(
            "fp8 scaling granularity: one scale per tensor (Transformer Engine delayed or current "
            "scaling), per row (torchao rowwise) or per block of 32-128 values (MXFP8, "
            'DeepSeek-style 1x128). Ignored unless `precision` is `"fp8"`.'
        ),
        acts=(
            "fp8 matmul speed (row/block scaling 0.90 of per-tensor in software; block scaling "
            "native on Blackwell), quantisation traffic (x1.5 for row/block)"
        ),
    ),
    "training.offload": Documented(
        meaning=(
            "the contract's offload key: fp32 master weights and Adam moments (and with "
            "`optimizer_and_params` the 16-bit weights too) live in host memory (ZeRO-Offload, "
            "FSDP CPU offload)."
        ),
        acts=(
            "device memory (no optimizer state; weights: two layers in flight), PCIe copies of "
            "gradients and weights, CPU Adam time"
        ),
    ),
    "training.method": Documented(
        meaning=(
            "the contract's key. Full training trains every weight but the frozen ones; LoRA "
            "freezes every base weight and trains rank-r adapters on the `targets`: the groups "
            '`"attention"` (Q, K, V, O) and `"mlp"` (gate, up, down, experts included), or single '
            'projections by their Hugging Face names `"q_proj"`, `"k_proj"`, `"v_proj"`, '
            '`"o_proj"`, `"gate_proj"` (gated MLPs only), `"up_proj"`, `"down_proj"` (PEFT\'s '
            'default for LLaMA is `["q_proj", "v_proj"]`); `dropout` is LoRA\'s `lora_dropout`, '
            "which stores a copy of each adapter's input. QLoRA also stores the frozen "
            "transformer-block weights in 4-bit NF4 with double quantisation (4.127 bits) and "
            'needs `precision` `"bf16"` or `"fp16"`. `rank`/`targets`/`dropout` belong to '
            "LoRA/QLoRA only, `frozen_*` to full training only."
        ),
        acts=(
            "weights at their stored size, gradients and optimizer state for the trained weights "
            "only; activations (adapter intermediates and dropout copies); FLOPs (no "
            "weight-gradient matmuls for frozen weights, no backward below every trained weight, "
            "adapter matmuls, QLoRA dequantisation traffic); data-parallel traffic; checkpoint "
            "size; output `training_method`"
        ),
        values=(
            '`{"type": "full"}` with optional `"frozen_layers"` (0 to `num_layers`, the bottom '
            'layers) and `"frozen_embeddings"` (`true`/`false`); `{"type": "lora" \\| "qlora", '
            '"rank": 1-4096, "targets": [...], "dropout": 0-0.9}`'
        ),
        default='`{"type": "full"}`; rank 16, targets `["attention", "mlp"]`, dropout 0',
    ),
    "training.optimizer": Documented(
        meaning=(
            "the contract's key. State per trained parameter besides the fp32 master copy of "
            "mixed-precision full training: 8, 2, ~0 (factored), 4 and 4 B (16-bit moments: half, "
            "but 8-bit AdamW's 2 B)."
        ),
        acts="optimizer memory and the optimizer step's traffic, host memory with offload",
    ),
    "training.master_weights": Documented(
        meaning=(
            "`false` is pure 16-bit training (torchtune's and LLaMA-Factory's `pure_bf16`): no "
            "fp32 master copy, optimizer moments in 16 bits, 2 + 2 + 4 B per parameter with "
            "AdamW. Refused with `fp32`/`tf32`."
        ),
        acts="optimizer memory and traffic",
    ),
    "parallelism.activation_offload": Documented(
        meaning=(
            "saved activations are copied to host memory in the forward pass and back in the "
            "backward pass (MaxText's `*_offloaded` remat policies, Megatron activation "
            "offloading), overlapped with compute. The layout search does not choose it."
        ),
        acts=(
            "activation memory (two layers of one micro-batch stay on the device), exposed "
            "host-copy time"
        ),
    ),
    "framework": Documented(
        meaning=(
            "what runs the training (`estimator/core/frameworks.py`): the parallelisms, "
            "schedules, ZeRO stages, recompute, fp8 and offload modes, training methods and "
            "optimizers it supports and the memory headroom it keeps. TPUs accept only `maxtext`. "
            "A named framework also sets the **software stack** whose calibrated efficiency the "
            "estimate runs at (`megatron-lm` -> vendor-tuned Megatron, `torchtitan` -> "
            "PyTorch-native, `nanotron`, `deepspeed`, `maxtext`, `hf-peft`, the 2021 profiles -> "
            'the 2021-22 stacks); `"auto"` assumes the pooled (median) stack and widens the band '
            "by the between-stack spread, except where only one stack runs the scenario (MaxText "
            "on TPUs, the 2021 stack for fp16)."
        ),
        acts=(
            "the layout search's grid and memory limit; explicit layouts and training options "
            "outside the profile are refused naming the key; kernel efficiency and software "
            "overhead (the stack's factor); the band"
        ),
        default=(
            '`"auto"` (Megatron-LM on GPUs and Gaudi, MaxText on TPUs; fp16 on an NVIDIA GPU with '
            "bf16 is the 2021 stack without FlashAttention, `megatron-lm-2021`, then its sharded "
            "contemporaries `megatron-deepspeed-2022` when a stated ZeRO layout needs them or no "
            "searched layout fits; when that profile cannot run the scenario, the first that can: "
            "QLoRA resolves to `hf-peft`)"
        ),
    ),
    "run.capacity": Documented(
        meaning=(
            "spot capacity adds preemptions to the whole run; the planner sets it when the run is "
            "priced at a spot price"
        ),
        acts="`whole_run.parts_days.preemptions`",
    ),
    "run.evaluation_fraction": Documented(
        meaning="evaluation as a share of training time",
        acts="`whole_run.parts_days.evaluation`",
    ),
    "run.allocation_idle": Documented(
        meaning=(
            "share of the allocation held but not training; a stated share holds whatever the "
            "run's length"
        ),
        acts="`whole_run.parts_days.allocation_idle`",
        default=(
            "s (1 - e^-E): the fitted saturated share s (`estimator/data/whole_run.json`) at the "
            "E interruptions the run expects"
        ),
    ),
    "margins.network_jitter": Documented(
        meaning=(
            "the contract's key, given the product's meaning: time a synchronous step loses to "
            "the network at cluster scale, added to the whole step: 0 inside one node, the stated "
            "share at 1,024 devices, up to twice it on the largest clusters"
        ),
        acts="`time_per_step_breakdown_s.network_jitter`, `margins_applied`",
    ),
    "measurement": Documented(
        meaning=(
            "measured beats modelled: the estimate's step time is the model's times measured / "
            "predicted at the measured configuration (the scenario's own unless "
            "`cluster`/`parallelism` name another); `factor` states that ratio directly (what a "
            "lever of a measured scenario carries). A figure 10x off the model is refused as a "
            "unit slip"
        ),
        acts=(
            "every figure that follows from the step time; `calibration` in the output; the Monte "
            "Carlo's efficiency spread falls to 5 %"
        ),
        values=(
            '`{"step_time_s" \\| "tokens_per_s" \\| "mfu" \\| "factor": number, "measured_on": '
            '"yyyy-mm-dd", "cluster": {...}, "parallelism": {...}}`, exactly one figure'
        ),
        default="none",
    ),
    "cluster.num_slices": Documented(
        meaning=(
            "TPU slices joined over the data-centre network (multislice). Each slice is one ICI "
            "domain of `num_gpus / num_slices` chips; traffic between slices runs at the "
            "catalog's DCN bandwidth per chip. Refused for GPUs (their fast domain is "
            "`gpus_per_node`)."
        ),
        acts="which collectives leave the fast domain",
        values="positive integer dividing `num_gpus`",
    ),
    "cluster.power_limit_w": Documented(
        meaning=(
            "board power limit per device (`nvidia-smi -pl`). Every compute peak (all precisions) "
            "is multiplied by the sustained share measured at that share of the TDP "
            '(`estimator/core/power.py`, docs/methodology.md "Power limits": 0.787 at 500 W on an '
            "H100 SXM); memory and link bandwidths are not scaled. Refused above the TDP, below "
            "the lowest measured share, or on a chip whose TDP is unknown (`tdp_w` 0). MFU stays "
            "against the datasheet peaks."
        ),
        acts="compute time (matmuls, attention), the layout search",
        values=(
            "positive number, at most the accelerator's TDP (`tdp_w`) and at least 7/12 of it "
            "(409 W on a 700 W H100 SXM)"
        ),
        default="absent or `null`: the TDP, no limit",
    ),
}

OUTPUT_KEYS: tuple[tuple[str, str], ...] = (
    (
        "`mfu`",
        "model FLOPs utilisation against the dense peak of the training precision (`mfu_peak`): "
        "with fp8 the fp8 peak, so MFU falls as speed rises",
    ),
    (
        "`mfu_peak`",
        '`{"precision", "tflops"}`: the peak `mfu` and `hfu` are measured against',
    ),
    (
        "`mfu_bf16`",
        "MFU against the accelerator's dense BF16 (else FP16) peak: the figure to compare across "
        "precisions and accelerators",
    ),
    (
        "`hardware_flops_per_token`, `num_micro_batches`, `tokens_per_step`, `goodput_details`, "
        "`estimator_version`",
        "as before",
    ),
    (
        "`time_per_step_breakdown_s.framework_overhead`, `.network_jitter`",
        "the two margins as separate lines of the step (`overheads` is their sum)",
    ),
    (
        "`margins_applied`",
        '`{"framework_overhead", "framework_overhead_scale", "network_jitter", '
        '"network_jitter_scale"}`: the margins as shares of the margin-free step at this cluster '
        "size and stack (the framework overhead times the stack's `framework_overhead_scale`, 1 "
        "over its factor)",
    ),
    (
        "`software_stack`",
        '`{"id", "name", "factor", "calibrated"}`: the stack the estimate assumed (`"pooled"` '
        "when no framework was named) and its factor on kernel efficiency; the command line's "
        "`estimate` and the planner's runs add `alternatives`: for every calibrated stack of "
        "today's kernels the same layout's `relative_speed` (tokens/s there over tokens/s here)",
    ),
    (
        "`whole_run`",
        '`{"steady_state_days", "steady_state_gpu_hours", "parts_days", "parts_gpu_hours", '
        '"capacity"}`: the steady state and each part of the whole run (checkpoint_writes, '
        "failures_and_restarts, preemptions, evaluation, ramp_up, stragglers, allocation_idle); "
        "`training_days` and `gpu_hours` are their totals",
    ),
    (
        "`framework`",
        'the profile used: `{"id", "name", "memory_headroom", "supports"}`',
    ),
    (
        "`training_method`",
        '`{"type", "rank", "targets", "dropout"}` (LoRA/QLoRA) or `{"type", "frozen_layers", '
        '"frozen_embeddings"}` (full), plus `"optimizer"`, `"master_weights"`, `"offload"`, '
        '`"description"`, `"trainable_parameters"`, `"trainable_share"` and '
        '`"host_memory_per_node_gib"` (offloaded optimizer state, and with `optimizer_and_params` '
        "the weights, of one node's devices; 0 without offload; a warning above 1 TiB)",
    ),
    (
        "`model_flops_per_token`",
        "for fine-tuning, the FLOPs the method needs (frozen weights: 4 per weight, or 2 below "
        "every trained weight; adapters 6); `mfu` is measured with it",
    ),
    (
        "`memory_headroom`",
        '`{"usable_gib", "headroom_gib", "used_fraction"}`: memory the profile lets a layout use '
        "and what the layout leaves of it",
    ),
    (
        "`memory_verdict`",
        '`"fits"` (within the usable memory), `"tight"` (within the device but over the usable '
        'memory: it may run out of memory) or `"does_not_fit"` (over the device; '
        "`fits_in_memory` is false only then): the one verdict pages, API and sign-off show",
    ),
    (
        "`calibration`",
        'with a `measurement` only: `{"source", "kind", "value", "measured_on", "factor", '
        '"measured_step_time_s", "predicted_step_time_s", "measured_parallelism", '
        '"measured_num_gpus"}`',
    ),
    (
        "`alternatives`",
        '`"auto"` only: up to three runners-up of different shapes with `parallelism`, '
        "`tokens_per_s_per_gpu`, `mfu`, `training_days`, `memory_total_gib`, `slower_by`, "
        "`reasons` and `why`",
    ),
)
LEVERS_KEYS: tuple[tuple[str, str], ...] = (
    (
        "`kind`",
        "`precision`, `padding`, `recompute`, `micro_batch`, `zero`, `schedule`, "
        '`sequence_parallel`, `layout` or `cluster` (`docs/methodology.md`, "Levers")',
    ),
    (
        "`memory_total_gib`, `step_time_s`",
        "of the changed scenario",
    ),
    (
        "`gpu_hours_saved`, `training_days_saved`",
        "baseline minus the lever (negative: the change costs more)",
    ),
)

_INTRO = """\
# Scenario keys the project adds to the contract

<!-- Generated from estimator/core/schema.py and schema_docs.py by
     `python -m estimator schema-docs --write`; edit those, not this file. -->

`../shared/scenario-format.md` (version 1) is the contract; the project may add keys but never
rename or drop one. These are the keys TrainPlan adds or gives a meaning the contract leaves
open. Every one is optional and defaults to the behaviour of a scenario without it; a bad
value exits 2 (CLI) or answers 400 (API) naming the key, like any other field.
"""

_EVERY_KEY = """\
## Every key: kind, bounds, unit and default

The rules `estimator/core/validation.py`, the planner's scenario form and its API apply, from
`estimator/core/schema.py`. A bound is inclusive where written `[`/`]`, exclusive where
`(`/`)`; integers are at most 2^40 unless stated. Unit `1` is a share. A required key inside
an optional object (`model.moe`, `model.mla`) is required when the object is given.
"""

_SEARCH_NOTE = """\
`search` results after the first carry `comparison` (`slower_by`, `reasons`, `why`) against
the first.

`estimate --uncertainty` adds `percentiles` exactly as the contract says, and `uncertainty`
holds `samples` and `seed` plus the distributions the Monte Carlo sampled (margin ranges around
the scenario's own margins, the family's out-of-sample `efficiency_sigma`, failure and restart
spreads). The Monte Carlo's own warnings are appended to `warnings`.
"""


def default_text(k: Key) -> str:
    """The default as the page states it: numbers plain, other literals as code."""
    if k.required:
        return "required"
    literal = k.default_literal
    if not literal:
        return k.default_shown
    return (
        literal
        if isinstance(k.default, int | float) and not isinstance(k.default, bool)
        else f"`{literal}`"
    )


def _cell(text: str) -> str:
    """``text`` safe inside a table cell."""
    return text.replace("|", "\\|")


def _table(header: tuple[str, ...], rows: Iterable[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _label(path: str) -> str:
    return f"`{path}`" + (" (top level)" if "." not in path else "")


def _added_rows() -> Iterable[tuple[str, ...]]:
    for path, doc in ADDED.items():
        k = key(path)
        values = doc.values or values_text(k)
        yield _label(path), values, doc.default or default_text(k), doc.meaning, doc.acts


def _every_rows() -> Iterable[tuple[str, ...]]:
    for k in KEYS:
        yield f"`{k.path}`", _cell(values_text(k)), k.unit, _cell(default_text(k)), k.help


def values_text(k: Key) -> str:
    """The kind of value with its bounds or choices, literals as code."""
    return k.values(code=lambda literal: f"`{literal}`")


def render() -> str:
    """The whole of ``docs/scenario-keys.md``."""
    parts = [
        _INTRO,
        _table(("key", "values", "default", "meaning", "where it acts"), _added_rows()),
        _EVERY_KEY,
        _table(("key", "values", "unit", "default", "help"), _every_rows()),
        "## Keys the estimate adds to its output\n",
        _table(("key", "meaning"), OUTPUT_KEYS),
        _SEARCH_NOTE,
        "## Keys the `levers` output adds\n",
        _table(("key", "meaning"), LEVERS_KEYS),
    ]
    return "\n".join(parts)
