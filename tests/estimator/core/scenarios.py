"""Scenario dicts shared by the core tests (published model shapes, not estimator outputs)."""

from __future__ import annotations

import copy
from typing import Any

GPT3_175B_MODEL: dict[str, Any] = {
    "name": "GPT-3 175B",
    "num_layers": 96,
    "hidden_size": 12288,
    "num_attention_heads": 96,
    "vocab_size": 51200,
    "seq_len": 2048,
    "tied_embeddings": True,
}

GPT3_175B: dict[str, Any] = {
    "format_version": 1,
    "model": GPT3_175B_MODEL,
    "training": {"tokens": 300e9, "global_batch_size": 1536, "precision": "bf16"},
    "cluster": {"accelerator": "A100-80GB-SXM", "num_gpus": 1024},
    "parallelism": {
        "tp": 8, "pp": 8, "dp": 16, "cp": 1, "micro_batch_size": 1, "zero_stage": 1,
        "recompute": "selective", "sequence_parallel": True,
    },
}  # fmt: skip

LLAMA3_405B: dict[str, Any] = {
    "format_version": 1,
    "model": {
        "name": "Llama 3 405B", "num_layers": 126, "hidden_size": 16384,
        "num_attention_heads": 128, "num_kv_heads": 8, "ffn_hidden_size": 53248,
        "gated_mlp": True, "vocab_size": 128256, "seq_len": 8192,
    },
    "training": {"tokens": 15.6e12, "global_batch_size": 2048, "precision": "bf16"},
    "cluster": {"accelerator": "H100-SXM", "num_gpus": 16384},
    "parallelism": {
        "tp": 8, "pp": 16, "dp": 128, "cp": 1, "micro_batch_size": 1, "zero_stage": 1,
        "recompute": "none", "pipeline_schedule": "interleaved", "virtual_stages": 7,
    },
}  # fmt: skip

SMALL: dict[str, Any] = {
    "format_version": 1,
    "model": {
        "name": "1B", "num_layers": 16, "hidden_size": 2048, "num_attention_heads": 16,
        "vocab_size": 32000, "seq_len": 2048,
    },
    "training": {"tokens": 1e11, "global_batch_size": 256, "precision": "bf16"},
    "cluster": {"accelerator": "H100-SXM", "num_gpus": 16},
    "parallelism": {
        "tp": 2, "pp": 2, "dp": 4, "micro_batch_size": 2, "zero_stage": 1,
        "recompute": "none",
    },
}  # fmt: skip


def scenario(base: dict[str, Any], **sections: Any) -> dict[str, Any]:
    """A deep copy of ``base`` with some section keys replaced, e.g. ``model={"seq_len": 4096}``."""
    result = copy.deepcopy(base)
    for section, values in sections.items():
        if isinstance(result.get(section), dict) and isinstance(values, dict):
            result[section].update(values)
        else:
            result[section] = values
    return result
