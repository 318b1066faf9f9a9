"""Time the estimator beside a base revision: ``estimate()``, the "auto" search, the command
line and vectorised layouts.

    python benchmarks/bench_estimator.py [--repeat 2000] [--base dd4dc3e] [--rounds 3]

The base revision's ``estimator/`` (``git archive`` into a temporary directory) and this
tree's are timed in turns, each round in a fresh subprocess per tree, so both meet the same
machine load; each figure is the median over the rounds. ``--base ''`` times this tree only.

Targets (issue 33) for GPT-3 175B on 1,024 A100s: estimate() <= 1.0 ms median, the "auto"
search <= 0.065 s, CLI wall time <= 1 s, >= 500,000 layouts/s, and >= 5x faster than Calculon
timed on the same run: install a checkout of github.com/calculon-ai/calculon where this Python
imports it (e.g. ``pip install --target DIR`` and ``PYTHONPATH=DIR``) and pass the checkout
with ``--calculon-data`` for its models and systems. It is not a dependency of TrainPlan.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import logging
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from io import BytesIO
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: The release before the estimator's speed work (issue 33, item 1).
BASE_REVISION = "dd4dc3e"

GPT3_ON_1024_A100 = {
    "format_version": 1,
    "model": {"name": "GPT-3 175B", "num_layers": 96, "hidden_size": 12288,
              "num_attention_heads": 96, "vocab_size": 51200, "seq_len": 2048},
    "training": {"tokens": 300e9, "global_batch_size": 1536, "precision": "bf16"},
    "cluster": {"accelerator": "A100-80GB-SXM", "num_gpus": 1024},
    "parallelism": {"tp": 8, "pp": 8, "dp": 16, "micro_batch_size": 1, "zero_stage": 1,
                    "recompute": "selective"},
}  # fmt: skip
GPT3_AUTO = {**GPT3_ON_1024_A100, "parallelism": "auto"}


def median_seconds(call: Callable[[], object], repeat: int) -> float:
    """Median wall seconds of ``call()`` over ``repeat`` calls, after one warm-up call."""
    call()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def grid_layouts(core: Any, num_gpus: int = 1024, copies: int = 200) -> Any:
    """Every tp x pp x dp x micro-batch x ZeRO x recompute x v combination for num_gpus,
    repeated ``copies`` times so the timing covers a search-sized batch (~0.5 M layouts).
    """
    import numpy as np

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
    return core.Layouts.from_arrays(
        tp=tp[index], pp=pp[index], dp=dp[index], cp=1, ep=1, micro_batch_size=micro,
        zero_stage=zero, recompute=recompute, sequence_parallel=tp[index] > 1,
        virtual_stages=virtual,
    )  # fmt: skip


def time_layouts(core: Any) -> tuple[int, float]:
    """(layouts, seconds) for one vectorised evaluate_layouts call."""
    workload_module = importlib.import_module("estimator.core.workload")
    workload = workload_module.build_workload(core.validate_scenario(GPT3_ON_1024_A100))
    layouts = grid_layouts(core)
    core.evaluate_layouts(workload, layouts)
    start = time.perf_counter()
    core.evaluate_layouts(workload, layouts)
    return len(layouts), time.perf_counter() - start


def measure(tree: Path, repeat: int, auto_repeat: int) -> dict[str, float]:
    """The in-process figures of the estimator under ``tree`` (imported from there)."""
    sys.path.insert(0, str(tree))
    core = importlib.import_module("estimator.core")
    count, seconds = time_layouts(core)
    return {
        "estimate_s": median_seconds(lambda: core.estimate(GPT3_ON_1024_A100), repeat),
        "auto_s": median_seconds(lambda: core.estimate(GPT3_AUTO), auto_repeat),
        "layouts_per_s": count / seconds,
    }


#: The same run in Calculon's terms (SC'23; github.com/calculon-ai/calculon): TP 8 with
#: sequence parallelism, PP 8, DP 16, micro-batch 1, ZeRO-1 (optimizer sharding), selective
#: recompute (attention only), the data-parallel reduction overlapped; its A100 system has
#: float16 where the scenario says bf16 (the same tensor-core rate).
CALCULON_EXECUTION = {
    "num_procs": 1024, "tensor_par": 8, "pipeline_par": 8, "data_par": 16,
    "tensor_par_net": 0, "pipeline_par_net": 1, "data_par_net": 1,
    "batch_size": 1536, "microbatch_size": 1, "datatype": "float16",
    "fused_activation": True, "attention_type": "multihead", "activation_recompute": "attn_only",
    "pipeline_interleaving": 1, "optimizer_sharding": True, "tensor_par_comm_type": "rs_ag",
    "tensor_par_overlap": "none", "seq_par_ag_redo": False, "data_par_overlap": True,
    "weight_offload": False, "activations_offload": False, "optimizer_offload": False,
    "training": True,
}  # fmt: skip


def calculon_seconds(data: Path | None, repeat: int) -> float | None:
    """Median seconds of one Calculon evaluation of GPT-3 175B on 1,024 A100s (application,
    compile, run), or None, saying why, when Calculon or its data is missing."""
    if importlib.util.find_spec("calculon") is None:
        print(
            "Calculon: not installed (pip install a checkout of calculon-ai/calculon), not timed."
        )
        return None
    if data is None or not (data / "models" / "gpt3-175B.json").exists():
        print("Calculon: installed, but --calculon-data names no checkout with models/: not timed.")
        return None
    calculon = importlib.import_module("calculon")
    llm = importlib.import_module("calculon.llm")
    application = llm.Llm.Application(
        json.loads((data / "models" / "gpt3-175B.json").read_text(encoding="utf-8"))
    )
    system_json = json.loads((data / "systems" / "a100_80g.json").read_text(encoding="utf-8"))
    logger = logging.getLogger("calculon")
    logger.disabled = True

    def evaluate() -> object:
        execution = llm.Llm.Execution.from_json(CALCULON_EXECUTION)
        system = calculon.System(system_json)
        model = llm.Llm(application, logger)
        model.compile(system, execution)
        model.run(system)
        return model.get_total_time()

    return median_seconds(evaluate, repeat)


def time_cli(tree: Path, repeat: int) -> float:
    """Median wall seconds of ``python -m estimator estimate FILE`` run in ``tree``."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(GPT3_ON_1024_A100, handle)
    command = [sys.executable, "-m", "estimator", "estimate", handle.name]
    seconds = median_seconds(
        lambda: subprocess.run(command, cwd=tree, check=True, capture_output=True), repeat
    )
    Path(handle.name).unlink()
    return seconds


def measured_in_subprocess(tree: Path, args: argparse.Namespace) -> dict[str, float]:
    """:func:`measure` of ``tree`` in a fresh interpreter, so each tree imports its own
    ``estimator`` and starts from cold caches."""
    command = [sys.executable, __file__, "--measure", str(tree), "--repeat", str(args.repeat)]
    command += ["--auto-repeat", str(args.auto_repeat)]
    done = subprocess.run(command, check=True, capture_output=True, text=True, cwd=tree)
    figures: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    figures["cli_s"] = time_cli(tree, args.cli_repeat)
    return figures


def export_base(revision: str, into: Path) -> Path:
    """``estimator/`` of ``revision`` extracted under ``into``."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", revision, "estimator"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def medians(rounds: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}


#: (figure, label, shown as, target): every figure is a time but the layouts per second.
LINES = (
    ("estimate_s", "estimate() in-process", lambda s: f"{s * 1e3:.3f} ms", "target <= 1.0 ms"),
    ("auto_s", '"auto" search', lambda s: f"{s:.4f} s", "target <= 0.065 s"),
    ("cli_s", "CLI wall time", lambda s: f"{s:.3f} s", "target <= 1 s"),
    ("layouts_per_s", "layouts per second", lambda n: f"{n:,.0f}", "target >= 500,000"),
)


def report(current: dict[str, float], base: dict[str, float] | None, revision: str) -> None:
    """Print each figure of this tree, and beside it the base's and the speed-up."""
    print(
        f"{'':24}{'this tree':>12}" + (f"{'base ' + revision:>14}{'speed-up':>10}" if base else "")
    )
    for key, label, shown, target in LINES:
        line = f"{label:24}{shown(current[key]):>12}"
        if base is not None:
            faster = (
                current[key] / base[key] if key == "layouts_per_s" else base[key] / current[key]
            )
            line += f"{shown(base[key]):>14}{faster:>9.2f}x"
        print(f"{line}   ({target})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2000, help="estimate() calls to time")
    parser.add_argument("--auto-repeat", type=int, default=20, help='"auto" searches to time')
    parser.add_argument("--cli-repeat", type=int, default=5, help="CLI runs to time")
    parser.add_argument("--rounds", type=int, default=3, help="turns of base and this tree")
    parser.add_argument("--base", default=BASE_REVISION, help="revision to time beside ('' none)")
    parser.add_argument(
        "--calculon-data",
        type=Path,
        default=os.environ.get("CALCULON_DATA") or None,
        help="a Calculon checkout's folder (models/, systems/); with Calculon importable, "
        "it is timed on the same run (env CALCULON_DATA)",
    )
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure is not None:  # the subprocess of measured_in_subprocess
        print(json.dumps(measure(args.measure, args.repeat, args.auto_repeat)))
        return
    calculon = calculon_seconds(args.calculon_data, args.auto_repeat * 10)
    with tempfile.TemporaryDirectory() as scratch:
        base_tree = export_base(args.base, Path(scratch)) if args.base else None
        current_rounds, base_rounds = [], []
        for _ in range(args.rounds):
            if base_tree is not None:
                base_rounds.append(measured_in_subprocess(base_tree, args))
            current_rounds.append(measured_in_subprocess(ROOT, args))
    current = medians(current_rounds)
    report(current, medians(base_rounds) if base_rounds else None, args.base)
    if calculon is not None:
        print(
            f"Calculon, same run: {calculon * 1e3:.3f} ms per evaluation; estimate() is "
            f"{calculon / current['estimate_s']:.1f}x faster (target >= 5x)"
        )


if __name__ == "__main__":
    main()
