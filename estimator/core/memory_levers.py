"""Memory levers: the usual fixes offered when a run does not fit in memory, or is tight.

Fine-tuning on the cards people own runs out of memory more often than it runs out of time,
and the fixes are well known (Dettmers et al. 2023, "QLoRA: Efficient Finetuning of Quantized
LLMs", https://arxiv.org/abs/2305.14314, sections 2-3: 4-bit base weights and paged
optimizers; Dettmers et al. 2022, "8-bit Optimizers via Block-wise Quantization", ICLR 2022:
8-bit Adam states; Hugging Face's "Methods and tools for efficient training on a single GPU":
gradient checkpointing, smaller batches and shorter sequences). Each is one change to the
scenario, estimated like every other lever (:mod:`estimator.core.levers`), so the list says
which of them makes the run fit.

Paged AdamW moves optimizer states to host memory when the device runs short; the estimator
does not model paging, so it is offered as what it amounts to under pressure: the optimizer
states offloaded to the CPU.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

from estimator.core.memory import FITS, result_memory_verdict
from estimator.core.schema import DEFAULT_LORA_TARGETS

Scenario = dict[str, Any]
Candidate = tuple[str, str, Scenario]  # kind, change in words, the changed scenario

KIND = "memory"
#: Offload modes, least offloaded first.
OFFLOAD_ORDER = ("none", "optimizer", "optimizer_and_params")
#: Shortest sequence a lever halves to. [tokens]
MIN_SEQ_LEN = 256
#: What a full fine-tune becomes with the QLoRA lever: Dettmers et al. 2023's adapters on
#: every linear layer, at the schema's default rank.
QLORA_FROM_FULL = {"type": "qlora", "rank": 16, "targets": ["attention", "mlp"]}


def _changed(scenario: Mapping[str, Any], section: str, **values: Any) -> Scenario:
    changed = copy.deepcopy(dict(scenario))
    changed[section] = {**changed.get(section, {}), **values}
    return changed


def _method(scenario: Mapping[str, Any]) -> dict[str, Any]:
    return dict(scenario["training"].get("method") or {"type": "full"})


def _optimizer_candidates(scenario: Scenario) -> Iterator[Candidate]:
    training = scenario["training"]
    optimizer = training.get("optimizer", "adamw")
    if optimizer == "adamw":
        yield (
            KIND,
            "optimizer: AdamW -> 8-bit AdamW (1 byte per state instead of 4)",
            _changed(scenario, "training", optimizer="adamw8bit"),
        )
    offload = training.get("offload", "none")
    for target in OFFLOAD_ORDER[OFFLOAD_ORDER.index(offload) + 1 :]:
        text = "optimizer states" if target == "optimizer" else "optimizer states and weights"
        yield (
            KIND,
            f"offload: {offload} -> {target} ({text} in CPU memory, as paged AdamW does "
            "when the device runs short)",
            _changed(scenario, "training", offload=target),
        )


def _adapter_candidates(scenario: Scenario) -> Iterator[Candidate]:
    method = _method(scenario)
    kind = method["type"]
    if kind == "full":
        yield (
            KIND,
            "method: full fine-tuning -> QLoRA r16 on attention and MLP (4-bit base weights)",
            _changed(scenario, "training", method=dict(QLORA_FROM_FULL)),
        )
        return
    rank = int(method.get("rank", 16))
    if rank >= 2:
        yield (
            KIND,
            f"LoRA rank: {rank} -> {rank // 2}",
            _changed(scenario, "training", method={**method, "rank": rank // 2}),
        )
    targets = list(method.get("targets", DEFAULT_LORA_TARGETS))
    if targets != ["attention"]:
        yield (
            KIND,
            f"LoRA targets: {', '.join(targets)} -> attention",
            _changed(scenario, "training", method={**method, "targets": ["attention"]}),
        )
    if kind == "lora":
        yield (
            KIND,
            "method: LoRA -> QLoRA (4-bit base weights)",
            _changed(scenario, "training", method={**method, "type": "qlora"}),
        )


def _sequence_candidates(scenario: Scenario) -> Iterator[Candidate]:
    seq = int(scenario["model"]["seq_len"])
    if seq // 2 >= MIN_SEQ_LEN:
        yield (
            KIND,
            f"sequence length: {seq:,} -> {seq // 2:,} tokens (the same tokens in total)",
            _changed(scenario, "model", seq_len=seq // 2),
        )


def _layout_candidates(scenario: Scenario, layout: Mapping[str, Any]) -> Iterator[Candidate]:
    explicit = {**copy.deepcopy(scenario), "parallelism": dict(layout)}
    micro = int(layout["micro_batch_size"])
    if micro > 1:
        yield (
            KIND,
            f"micro-batch: {micro} -> 1 (more gradient accumulation)",
            _changed(explicit, "parallelism", micro_batch_size=1),
        )
    if layout.get("recompute") != "full":
        yield (
            KIND,
            f"gradient checkpointing: recompute {layout.get('recompute')} -> full",
            _changed(explicit, "parallelism", recompute="full"),
        )


def memory_candidates(scenario: Scenario, baseline: Mapping[str, Any]) -> Iterator[Candidate]:
    """The memory levers of ``scenario`` when its estimate ``baseline`` is not a plain fit.

    Changes of the model or the training keep the scenario's ``parallelism`` (``"auto"``
    lets the search choose again); micro-batch and checkpointing change the layout used.
    """
    if result_memory_verdict(baseline) == FITS:
        return
    yield from _optimizer_candidates(scenario)
    yield from _adapter_candidates(scenario)
    yield from _sequence_candidates(scenario)
    yield from _layout_candidates(scenario, baseline["parallelism"])
