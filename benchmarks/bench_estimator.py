"""Time the estimator: in-process ``estimate()``, the command line, and vectorised layouts.

    python benchmarks/bench_estimator.py [--repeat 2000]

Targets (issue 3/4): estimate() <= 2 ms, CLI wall time <= 1 s, >= 500,000 layouts/s for
GPT-3 175B on 1,024 A100s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from estimator.core import Layouts, estimate, evaluate_layouts, validate_scenario  # noqa: E402
from estimator.core.workload import build_workload  # noqa: E402

GPT3_ON_1024_A100 = {
    "format_version": 1,
    "model": {"name": "GPT-3 175B", "num_layers": 96, "hidden_size": 12288,
              "num_attention_heads": 96, "vocab_size": 51200, "seq_len": 2048},
    "training": {"tokens": 300e9, "global_batch_size": 1536, "precision": "bf16"},
    "cluster": {"accelerator": "A100-80GB-SXM", "num_gpus": 1024},
    "parallelism": {"tp": 8, "pp": 8, "dp": 16, "micro_batch_size": 1, "zero_stage": 1,
                    "recompute": "selective"},
}  # fmt: skip


def time_estimate(repeat: int) -> float:
    """Median seconds of one in-process estimate() call (validation included)."""
    estimate(GPT3_ON_1024_A100)
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        estimate(GPT3_ON_1024_A100)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def time_cli(repeat: int) -> float:
    """Median wall seconds of ``python -m estimator estimate FILE``."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(GPT3_ON_1024_A100, handle)
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "estimator", "estimate", handle.name],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        samples.append(time.perf_counter() - start)
    Path(handle.name).unlink()
    return statistics.median(samples)


def grid_layouts(num_gpus: int = 1024, copies: int = 200) -> Layouts:
    """Every tp x pp x dp x micro-batch x ZeRO x recompute x v combination for num_gpus,
    repeated ``copies`` times so the timing covers a search-sized batch (~0.5 M layouts).
    """
    rows = [
        (tp, pp, num_gpus // (tp * pp))
        for tp in (1, 2, 4, 8)
        for pp in (1, 2, 4, 8, 16)
        if num_gpus % (tp * pp) == 0
    ]
    tp, pp, dp = (np.array(column, dtype=float) for column in zip(*rows, strict=True))
    grids = np.meshgrid(
        np.arange(len(rows)), [1, 2, 4, 8], [0, 1, 2, 3], [0, 1, 2], [1, 2, 3], indexing="ij"
    )
    index, micro, zero, recompute, virtual = (np.tile(g.ravel(), copies) for g in grids)
    return Layouts.from_arrays(
        tp=tp[index], pp=pp[index], dp=dp[index], cp=1, ep=1, micro_batch_size=micro,
        zero_stage=zero, recompute=recompute, sequence_parallel=tp[index] > 1,
        virtual_stages=virtual,
    )  # fmt: skip


def time_layouts() -> tuple[int, float]:
    """(layouts, seconds) for one vectorised evaluate_layouts call."""
    workload = build_workload(validate_scenario(GPT3_ON_1024_A100))
    layouts = grid_layouts()
    evaluate_layouts(workload, layouts)
    start = time.perf_counter()
    evaluate_layouts(workload, layouts)
    return len(layouts), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2000, help="estimate() calls to time")
    parser.add_argument("--cli-repeat", type=int, default=5, help="CLI runs to time")
    args = parser.parse_args()
    per_call = time_estimate(args.repeat)
    print(f"estimate() in-process: {per_call * 1e3:.3f} ms median (target <= 2 ms)")
    print(f"CLI wall time:         {time_cli(args.cli_repeat):.3f} s median (target <= 1 s)")
    count, seconds = time_layouts()
    print(
        f"vectorised layouts:    {count / seconds:,.0f} layouts/s ({count:,} layouts in "
        f"{seconds * 1e3:.1f} ms; target >= 500,000/s)"
    )


if __name__ == "__main__":
    main()
