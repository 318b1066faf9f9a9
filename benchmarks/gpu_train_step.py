"""Measure a small GPT's training step on one GPU and set the estimator's prediction beside it.

    python benchmarks/gpu_train_step.py [--out result.json] [--steps 20]

Needs PyTorch with CUDA (it runs on the device machine, not in CI). The model is a GPT with
no biases, pre-LayerNorm blocks, a 4h GELU MLP, tied embeddings and causal attention through
``scaled_dot_product_attention`` (FlashAttention kernels); mixed precision as most
PyTorch-native stacks train: fp32 master weights, bf16 autocast, fused AdamW. Each
configuration runs eager and under ``torch.compile``; the step time is the median of the
timed steps after warm-up. The same shape goes to the estimator as a scenario on the GPU it
ran on (``framework`` ``torchtitan``: the PyTorch-native stack; and ``"auto"``: the pooled
stack), with its default margins, and the script prints measured and predicted tokens/s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from estimator.core import estimate  # noqa: E402

#: (name, layers, hidden, heads, micro-batch, sequence length)
SHAPES = [
    ("gpt-350m", 24, 1024, 16, 16, 2048),
    ("gpt-1.3b", 24, 2048, 16, 8, 2048),
]
VOCAB = 50304


def scenario(shape: tuple[str, int, int, int, int, int], accelerator: str) -> dict[str, Any]:
    """The estimator's scenario for one measured shape on one GPU."""
    name, layers, hidden, heads, micro, seq = shape
    return {
        "format_version": 1,
        "model": {
            "name": name,
            "num_layers": layers,
            "hidden_size": hidden,
            "num_attention_heads": heads,
            "num_kv_heads": heads,
            "ffn_hidden_size": 4 * hidden,
            "gated_mlp": False,
            "vocab_size": VOCAB,
            "seq_len": seq,
            "tied_embeddings": True,
        },
        "training": {"tokens": 1e9, "global_batch_size": micro, "precision": "bf16"},
        "cluster": {"accelerator": accelerator, "num_gpus": 1},
        "parallelism": {"tp": 1, "pp": 1, "dp": 1, "cp": 1, "micro_batch_size": micro,
                        "zero_stage": 0, "recompute": "none"},
    }  # fmt: skip


def predicted(shape: tuple[str, int, int, int, int, int], accelerator: str) -> dict[str, float]:
    """Predicted tokens/s on the PyTorch-native stack and on the pooled one."""
    data = scenario(shape, accelerator)
    return {
        "pytorch_native": estimate({**data, "framework": "torchtitan"})["tokens_per_s_per_gpu"],
        "pooled": estimate(data)["tokens_per_s_per_gpu"],
    }


def measure(shape: tuple[str, int, int, int, int, int], compiled: bool, steps: int) -> float:
    """Median tokens/s of ``steps`` timed training steps (after warm-up)."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    _, layers, hidden, heads, micro, seq = shape
    torch.cuda.empty_cache()

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(hidden, bias=False), nn.LayerNorm(hidden, bias=False)
            self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)
            self.out = nn.Linear(hidden, hidden, bias=False)
            self.up = nn.Linear(hidden, 4 * hidden, bias=False)
            self.down = nn.Linear(4 * hidden, hidden, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, s, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, heads, -1).unbind(2)
            y = F.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
            )
            x = x + self.out(y.transpose(1, 2).reshape(b, s, hidden))
            return x + self.down(F.gelu(self.up(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(VOCAB, hidden)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln = nn.LayerNorm(hidden, bias=False)

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            x = self.embed(tokens)
            for block in self.blocks:
                x = block(x)
            return self.ln(x) @ self.embed.weight.t()

    torch.manual_seed(0)
    model = GPT().cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    run = torch.compile(model) if compiled else model
    tokens = torch.randint(0, VOCAB, (micro, seq + 1), device="cuda")

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = run(tokens[:, :-1])
            loss = F.cross_entropy(logits.float().view(-1, VOCAB), tokens[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(5):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return micro * seq / statistics.median(times)


def main() -> int:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    device = torch.cuda.get_device_name()
    accelerator = "H200-SXM" if "H200" in device else "H100-SXM"
    rows = []
    for shape in SHAPES:
        guess = predicted(shape, accelerator)
        for compiled in (False, True):
            measured = measure(shape, compiled, args.steps)
            row = {"shape": shape[0], "compiled": compiled, "measured": measured, **guess}
            rows.append(row)
            print(
                f"{shape[0]:9s} {'compiled' if compiled else 'eager':8s} measured "
                f"{measured:9.0f} tok/s  predicted pytorch-native {guess['pytorch_native']:9.0f}"
                f" ({guess['pytorch_native'] / measured - 1:+.1%})  pooled {guess['pooled']:9.0f}"
                f" ({guess['pooled'] / measured - 1:+.1%})",
                flush=True,
            )
    record = {"device": device, "torch": torch.__version__, "accelerator": accelerator,
              "rows": rows}  # fmt: skip
    if args.out:
        args.out.write_text(json.dumps(record, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
