"""Time the layout search over its whole grid.

    python benchmarks/bench_search.py [--repeat 3]

Targets (issue 4): GPT-3 175B on 1,024 A100-80GB <= 1 s and >= 500,000 layouts/s; a 1T
model on 4,096 A100-80GB <= 5 s.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from estimator.core import search  # noqa: E402

GPT3_ON_1024_A100: dict[str, Any] = {
    "format_version": 1,
    "model": {"name": "GPT-3 175B", "num_layers": 96, "hidden_size": 12288,
              "num_attention_heads": 96, "vocab_size": 51200, "seq_len": 2048},
    "training": {"tokens": 300e9, "global_batch_size": 1536, "precision": "bf16"},
    "cluster": {"accelerator": "A100-80GB-SXM", "num_gpus": 1024},
    "parallelism": "auto",
}  # fmt: skip

# Narayanan et al. 2021, Table 1, last row (1T parameters), on 4,096 instead of 3,072 GPUs.
TRILLION_ON_4096_A100: dict[str, Any] = {
    "format_version": 1,
    "model": {"name": "GPT 1T", "num_layers": 128, "hidden_size": 25600,
              "num_attention_heads": 160, "vocab_size": 51200, "seq_len": 2048,
              "tied_embeddings": True},
    "training": {"tokens": 1e12, "global_batch_size": 3072, "precision": "bf16"},
    "cluster": {"accelerator": "A100-80GB-SXM", "num_gpus": 4096},
    "parallelism": "auto",
}  # fmt: skip


def time_search(data: dict[str, Any], repeat: int) -> tuple[float, dict[str, Any]]:
    """Median wall seconds of one whole search (validation included), and its output."""
    samples, found = [], search(data)
    for _ in range(repeat):
        start = time.perf_counter()
        found = search(data)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), found


def report(label: str, seconds: float, found: dict[str, Any], target_s: float) -> None:
    considered = found["layouts_considered"]
    best = found["results"][0] if found["results"] else None
    layout = best["parallelism"] if best else found.get("reason")
    print(
        f"{label}: {seconds:.3f} s (target <= {target_s:g} s), {considered:,} layouts, "
        f"{considered / seconds:,.0f} layouts/s, {found['layouts_fitting']:,} fit; best {layout}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="searches to time per case")
    args = parser.parse_args()
    seconds, found = time_search(GPT3_ON_1024_A100, args.repeat)
    report("GPT-3 175B on 1,024 A100-80GB", seconds, found, 1.0)
    print("  (target >= 500,000 layouts/s)")
    seconds, found = time_search(TRILLION_ON_4096_A100, args.repeat)
    report("1T on 4,096 A100-80GB", seconds, found, 5.0)


if __name__ == "__main__":
    main()
