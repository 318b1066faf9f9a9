"""Time what a newcomer waits for on ``make run``: tasks in the web process against a worker.

    .venv/bin/python benchmarks/bench_make_run.py [--repeat 3] [--max-gpus 16384]

For each mode it prepares a fresh ``var/`` in a temporary folder (``migrate``, ``load_demo``),
serves it on a free port and, as ``maya`` through the API as the pages do, starts the demo's
A100 run and asks the demo's capacity plan (Llama 3 70B, 2T tokens by 2027-06-30, 9,000,000
USD, up to ``--max-gpus`` GPUs, the newest published price book, every quote and on-prem
profile: the plan ``bench_capacity_plan.py`` times). It prints, per job, how long the POST held the
caller (what a page waits before it can show anything) and how long until the job finished.

- ``eager``: ``manage.py runserver``, tasks in the web process (``make run`` before the worker).
- ``worker``: ``scripts/serve.py``, the web server with a Celery worker and beat on the broker
  kept in files (``make run`` now).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
POLL_S, JOB_TIMEOUT_S = 0.1, 600.0
DEMO_DEADLINE = date(2027, 6, 30)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def prepare(var_dir: Path) -> dict[str, str]:
    unset = ("DATABASE_URL", "REDIS_URL", "TRAINPLAN_LOCAL_WORKER")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update(DJANGO_DEBUG="1", TRAINPLAN_VAR_DIR=str(var_dir), PYTHONUNBUFFERED="1")
    for step in (["migrate", "--noinput"], ["load_demo"]):
        subprocess.run(
            [PYTHON, "manage.py", *step], cwd=ROOT, env=env, check=True, capture_output=True
        )
    return env


def serve(mode: str, address: str, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    command = {
        "eager": [PYTHON, "manage.py", "runserver", "--noreload", address],
        "worker": [PYTHON, "scripts/serve.py", address],
    }[mode]
    with log.open("wb") as out:
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def wait(check: Callable[[], bool], what: str, timeout: float) -> float:
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if check():
            return time.perf_counter() - start
        time.sleep(POLL_S)
    raise SystemExit(f"{what}: not within {timeout:g} s")


def ready(base: str) -> bool:
    try:
        return requests.get(f"{base}/readyz", timeout=5).status_code == 200
    except requests.RequestException:
        return False


def job(
    api: requests.Session, post_url: str, body: dict[str, Any], get_url: str
) -> dict[str, float]:
    """POST a job, then poll it until it is finished: the POST's and the whole time [s]."""
    start = time.perf_counter()
    answer = api.post(post_url, json=body, timeout=JOB_TIMEOUT_S)
    post_s = time.perf_counter() - start
    if answer.status_code != 202:
        raise SystemExit(f"POST {post_url} answered {answer.status_code}: {answer.text[:300]}")
    url = get_url.format(id=answer.json()["id"])

    def finished() -> bool:
        status = api.get(url, timeout=30).json()["status"]
        if status in ("failed", "cancelled"):
            raise SystemExit(f"{url} {status}")
        return status == "succeeded"

    wait(finished, url, JOB_TIMEOUT_S)
    return {"post_s": post_s, "done_s": time.perf_counter() - start}


def measure(mode: str, repeat: int, max_gpus: int) -> dict[str, list[dict[str, float]]]:
    with tempfile.TemporaryDirectory(prefix=f"bench-make-run-{mode}-") as folder:
        var_dir = Path(folder)
        env = prepare(var_dir)
        base = f"http://127.0.0.1:{free_port()}"
        process = serve(mode, base.removeprefix("http://"), env, var_dir / "serve.log")
        try:
            wait(lambda: ready(base), f"{mode} server ready", 90)
            api = requests.Session()
            token = api.post(
                f"{base}/api/v1/auth/token/",
                data={"username": "maya", "password": "maya-demo-pass"},
                timeout=30,
            ).json()["token"]
            api.headers["Authorization"] = f"Token {token}"
            scenario = api.get(f"{base}/api/v1/scenarios/", timeout=30).json()["results"][0]
            books = api.get(f"{base}/api/v1/price-books/", timeout=30).json()["results"]
            published = [book for book in books if book["status"] == "published"]
            newest = max(published, key=lambda book: (book["published_at"] or "", book["id"]))
            today = date.today()
            deadline = DEMO_DEADLINE if today < DEMO_DEADLINE else today + timedelta(days=200)
            plan = {
                "model_preset": "llama3-70b",
                "tokens": "2T",
                "deadline": deadline.isoformat(),
                "budget": "9000000",
                "currency": "USD",
                "max_gpus": max_gpus,
                "book": newest["id"],
            }
            figures: dict[str, list[dict[str, float]]] = {"run": [], "capacity plan": []}
            for _ in range(repeat):
                figures["run"].append(
                    job(
                        api,
                        f"{base}/api/v1/scenarios/{scenario['id']}/runs/",
                        {},
                        f"{base}/api/v1/runs/{{id}}/",
                    )
                )
                figures["capacity plan"].append(
                    job(
                        api,
                        f"{base}/api/v1/capacity-plans/",
                        plan,
                        f"{base}/api/v1/capacity-plans/{{id}}/",
                    )
                )
            return figures
        finally:
            process.send_signal(signal.SIGINT if mode == "worker" else signal.SIGTERM)
            process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--max-gpus", type=int, default=16_384)
    args = parser.parse_args()
    print(f"make run, demo data, {os.cpu_count()} CPUs; medians of {args.repeat} (min-max) [s]")
    print(f"{'mode':8} {'job':14} {'POST holds the page':>22} {'until finished':>20}")
    for mode in ("eager", "worker"):
        for name, runs in measure(mode, args.repeat, args.max_gpus).items():
            cells = []
            for key in ("post_s", "done_s"):
                values = [run[key] for run in runs]
                cells.append(
                    f"{statistics.median(values):7.2f} ({min(values):.2f}-{max(values):.2f})"
                )
            print(f"{mode:8} {name:14} {cells[0]:>22} {cells[1]:>20}")


if __name__ == "__main__":
    main()
