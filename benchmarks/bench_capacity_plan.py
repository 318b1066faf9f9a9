"""Time a saved capacity plan searched by 1, 2 and 4 Celery workers: submit to result.

    .venv/bin/python benchmarks/bench_capacity_plan.py [--workers 1 2 4] [--repeat 1] [--max-gpus N]
        [--postgres postgres://postgres@127.0.0.1:5432/postgres] [--redis redis://127.0.0.1:6379/13]

The demo's Llama 3 70B plan (2T tokens by 2027-06-30, 9,000,000 USD, up to 16,384 GPUs, the
newest published price book, every quote and on-prem profile), asked as ``maya`` through
``POST /api/v1/capacity-plans/`` as the web does. It starts (and stops, dropping the database
and flushing ``--redis``, when it ends) a throwaway database ``trainplan_bench_capacity`` with
``migrate`` and ``load_demo`` (tasks in-process: nothing left queued), gunicorn, and for each
worker count N, N ``celery worker --pool=solo`` processes. It prints the POST's time (with no
worker running, and with the workers searching), the time from submit until the plan's GET says
"succeeded" (polled every 0.1 s), the speed-up over 1 worker, and the same plan computed in this
process (:func:`planner.capacity.search.capacity_plan`) for reference: searching every size
(as before pruning) and pruned, in the same run, with whether their results are identical.
``--max-gpus 100000`` asks the same question up to 100,000 GPUs.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import redis
import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PYTHON = sys.executable
DB_NAME = "trainplan_bench_capacity"
PRESET, TOKENS, BUDGET, CURRENCY, MAX_GPUS = "llama3-70b", "2T", "9000000", "USD", 16_384
USER, PASSWORD = "maya", "maya-demo-pass"  # the demo's published login (planner/demo.py)
POLL_S, PLAN_TIMEOUT_S, POST_TARGET_MS = 0.1, 1800.0, 300.0
WORKER_FLAGS = "--pool=solo --without-heartbeat --without-mingle --without-gossip --loglevel=INFO"
Procs = list[subprocess.Popen[bytes]]
Run = dict[str, Any]


def services_check(server: str, broker: str) -> None:
    try:
        with psycopg.connect(server, connect_timeout=3) as probe:
            probe.execute("SELECT 1")
    except psycopg.OperationalError as error:
        raise SystemExit(f"PostgreSQL is not reachable at {server}: {error}") from None
    try:
        redis.Redis.from_url(broker, socket_connect_timeout=2).ping()
    except redis.RedisError as error:
        raise SystemExit(f"Redis is not reachable at {broker}: {error}") from None


def database_reset(server: str, create: bool) -> None:
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
        if create:
            admin.execute(f'CREATE DATABASE "{DB_NAME}"')


def stack_env(database: str, broker: str | None) -> dict[str, str]:
    """Production settings over plain http on the loopback (as benchmarks/load.py)."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "trainplan.settings", "DATABASE_URL": database,
           "DJANGO_DEBUG": "0", "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
           "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost", "DJANGO_SECURE_SSL_REDIRECT": "0",
           "DJANGO_SECURE_COOKIES": "0", "DJANGO_SECURE_HSTS_SECONDS": "0"}  # fmt: skip
    env.pop("REDIS_URL", None)
    return env | ({"REDIS_URL": broker} if broker else {})


def start(command: list[str], env: dict[str, str], log: Path, procs: Procs) -> None:
    with log.open("wb") as out:
        procs.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=out))


def stop(procs: Procs) -> None:
    """SIGTERM (a solo worker finishes its task, then exits), then wait; kill after 30 s."""
    for process in procs:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in procs:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    procs.clear()


def wait_for(check: Callable[[], bool], what: str, procs: Procs, logs: Path) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and all(process.poll() is None for process in procs):
        try:
            if check():
                return
        except requests.RequestException:
            pass
        time.sleep(0.3)
    raise SystemExit(f"{what} did not start (exited, or no answer in 90 s); logs in {logs}")


def question_inputs(max_gpus: int) -> dict[str, Any]:
    """The API's request body, and the plan computed in this process for reference, with
    its options built as :func:`capacity_plan_create` builds them: timed searching every
    size (``exhaustive``, as before pruning) and pruned (as the workers search), in turn."""
    from django.contrib.auth.models import User
    from django.utils import timezone

    from organisations.selectors import organisations_for
    from planner.capacity.search import (
        capacity_options,
        capacity_plan,
        capacity_scenario,
        plan_chunks,
    )
    from planner.capacity.search import deadline_days as days_until
    from pricing.models import PriceBook

    today = timezone.localdate()
    deadline = date(2027, 6, 30) if date(2027, 6, 30) > today else today + timedelta(days=200)
    organisation = organisations_for(User.objects.get(username=USER)).get()
    books = PriceBook.objects.filter(status=PriceBook.Status.PUBLISHED)
    book = books.order_by("-published_at", "-fetched_at", "-pk").first()
    if book is None:
        raise SystemExit("the demo data has no published price book")
    built = capacity_options(book=book, include_quotes=True, include_onprem=True,
                             currency=CURRENCY, max_gpus=max_gpus, on=today,
                             viewer=organisation)  # fmt: skip
    scenario = capacity_scenario(preset_id=PRESET, tokens=2e12)
    days = days_until(deadline, today=today)
    plans, seconds = {}, {}
    for exhaustive in (True, False):
        start_s = time.perf_counter()
        plans[exhaustive] = capacity_plan(
            scenario, built.options, deadline_days=days, budget=Decimal(BUDGET),
            exhaustive=exhaustive,
        )  # fmt: skip
        seconds[exhaustive] = time.perf_counter() - start_s
    result, whole = plans[False], plans[True]
    chunks = plan_chunks(built.options)
    body = {"model_preset": PRESET, "tokens": TOKENS, "deadline": deadline.isoformat(),
            "budget": BUDGET, "currency": CURRENCY, "max_gpus": max_gpus,
            "book": book.pk}  # fmt: skip
    figures = ("feasible", "frontier", "points", "notes")
    return {"body": body, "book": book.name, "options": len(built.options),
            "chunks": len(chunks), "sizes": sum(len(chunk["sizes"]) for chunk in chunks),
            "exhaustive_s": seconds[True], "pruned_s": seconds[False],
            "searched": result["points_evaluated"], "skipped": result["points_skipped"],
            "pruned_same": all(result[key] == whole[key] for key in figures),
            "result": json.loads(json.dumps(
                {key: result[key] for key in ("feasible", "frontier")}))}  # fmt: skip


def submit(api: requests.Session, base: str, body: dict[str, Any]) -> tuple[str, float]:
    """POST the plan as the web does: its URL and the response time [ms]."""
    start_s = time.perf_counter()
    answer = api.post(f"{base}/api/v1/capacity-plans/", json=body, timeout=30)
    post_ms = (time.perf_counter() - start_s) * 1000
    if answer.status_code != 202:
        raise SystemExit(f"POST capacity-plans answered {answer.status_code}: {answer.text[:500]}")
    return f"{base}/api/v1/capacity-plans/{answer.json()['id']}/", post_ms


def run_plan(api: requests.Session, base: str, body: dict[str, Any]) -> Run:
    """Submit the plan and poll it until it succeeds: the figures and the result."""
    start_s = time.perf_counter()
    url, post_ms = submit(api, base, body)
    while time.perf_counter() - start_s < PLAN_TIMEOUT_S:
        plan = api.get(url, timeout=30).json()
        if plan["status"] == "succeeded":
            result = {"feasible": plan["options"], "frontier": plan["frontier"]}
            return {"seconds": time.perf_counter() - start_s, "post_ms": post_ms,
                    "chunks": plan["chunks_total"], "result": result,
                    "chunk_s": chunk_seconds(plan["id"])}  # fmt: skip
        if plan["status"] in ("failed", "cancelled"):
            raise SystemExit(f"plan {plan['id']} {plan['status']}: {plan['error']}")
        time.sleep(POLL_S)
    raise SystemExit(f"plan at {url} did not finish within {PLAN_TIMEOUT_S:g} s")


def chunk_seconds(plan_id: int) -> float:
    """The chunks' summed time on the workers, claim to store: the search's CPU time when
    every worker has a core of its own, more when they share."""
    from planner.capacity.models import CapacityPlanChunk

    times = CapacityPlanChunk.objects.filter(plan_id=plan_id).values_list(
        "started_at", "finished_at"
    )
    return sum((end - begin).total_seconds() for begin, end in times if begin and end)


def quiet_posts(api: requests.Session, base: str, body: dict[str, Any], count: int = 3) -> float:
    """The POST with no worker running (median of ``count``); each of these plans is
    cancelled and its tasks purged from the broker before any worker starts."""
    from trainplan.celery import app

    samples = []
    for _ in range(count):
        url, post_ms = submit(api, base, body)
        api.post(f"{url}cancel/", timeout=30).raise_for_status()
        samples.append(post_ms)
    app.control.purge()
    return statistics.median(samples)


def workers_start(count: int, run: int, env: dict[str, str], logs: Path, procs: Procs) -> None:
    from trainplan.celery import app

    names = [f"bench{count}_{index}_{run}@{socket.gethostname()}" for index in range(count)]
    for name in names:
        command = [PYTHON, "-m", "celery", "-A", "trainplan", "worker", *WORKER_FLAGS.split()]
        start([*command, "-n", name], env, logs / f"{name.split('@')[0]}.log", procs)

    def all_answer() -> bool:
        replies = app.control.ping(destination=names, timeout=0.5) or []
        return {name for reply in replies for name in reply} == set(names)

    wait_for(all_answer, f"{count} Celery worker(s)", procs, logs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--repeat", type=int, default=1, help="plans per worker count")
    parser.add_argument("--max-gpus", type=int, default=MAX_GPUS, help="the plan's ceiling")
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/13")
    args = parser.parse_args()
    services_check(args.postgres, args.redis)
    broker = redis.Redis.from_url(args.redis)
    broker.flushdb()
    database = urlunsplit(urlsplit(args.postgres)._replace(path=f"/{DB_NAME}"))
    database_reset(args.postgres, create=True)
    logs = Path(tempfile.mkdtemp(prefix="bench_capacity_"))
    server: Procs = []
    workers: Procs = []
    runs: dict[int, list[Run]] = {}
    try:
        print(f"database {database}: migrate, load_demo (logs in {logs})", flush=True)
        for command in (["migrate", "--noinput", "-v0"], ["load_demo"]):
            done = subprocess.run([PYTHON, "manage.py", *command], cwd=ROOT, capture_output=True,
                                  text=True, env=stack_env(database, broker=None))  # fmt: skip
            if done.returncode:
                raise SystemExit(f"manage.py {command[0]} failed:\n{done.stderr[-3000:]}")
        env = stack_env(database, args.redis)
        os.environ.update(env)
        import django

        django.setup()
        print("in-process plan (capacity_plan) ...", flush=True)
        plan = question_inputs(args.max_gpus)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        base = f"http://127.0.0.1:{port}"
        gunicorn = f"-m gunicorn trainplan.wsgi --bind 127.0.0.1:{port} --workers 1".split()
        start([PYTHON, *gunicorn], env, logs / "gunicorn.log", server)
        wait_for(lambda: requests.get(f"{base}/livez", timeout=2).ok, "gunicorn", server, logs)
        api = requests.Session()
        login = {"username": USER, "password": PASSWORD}
        token = api.post(f"{base}/api/v1/auth/token/", json=login, timeout=30).json()["token"]
        api.headers["Authorization"] = f"Token {token}"
        api.post(f"{base}/api/v1/capacity-plans/", json={}, timeout=30)  # 400: warms the app up
        plan["quiet_post_ms"] = quiet_posts(api, base, plan["body"])
        plan["load"] = os.getloadavg()[0]
        for count in args.workers:
            for run in range(args.repeat):
                workers_start(count, run, env, logs, workers)
                print(f"{count} worker(s), plan {run + 1}/{args.repeat} ...", flush=True)
                runs.setdefault(count, []).append(run_plan(api, base, plan["body"]))
                stop(workers)
    finally:
        stop(workers)
        stop(server)
        database_reset(args.postgres, create=False)
        broker.flushdb()
    report(plan, runs, args.max_gpus)


def report(plan: dict[str, Any], runs: dict[int, list[Run]], max_gpus: int) -> None:
    every = [run for count_runs in runs.values() for run in count_runs]
    first, body = every[0], plan["body"]
    print(f"\nplan: {PRESET}, {TOKENS} tokens by {body['deadline']}, budget "
          f"{int(BUDGET):,} {CURRENCY}, up to {max_gpus:,} GPUs, book '{plan['book']}' "
          "+ quotes + on-prem")  # fmt: skip
    feasible = len(first["result"]["feasible"])
    print(f"priced options: {plan['options']}; chunks: {first['chunks']}; cluster sizes "
          f"searched: {plan['sizes']}; feasible options: {feasible}")  # fmt: skip
    identical = all(run["result"] == first["result"] for run in every)
    same = plan["result"] == first["result"]
    print(f"identical results: {'yes' if identical else 'no'} (feasible options and frontier "
          f"of all {len(every)} runs); same as in-process: {'yes' if same else 'no'}")  # fmt: skip
    print(f"in-process capacity_plan (search, merge), same run: every size "
          f"{plan['exhaustive_s']:.2f} s; pruned {plan['pruned_s']:.2f} s "
          f"({plan['searched']} sizes searched, {plan['skipped']} ruled out; "
          f"result {'identical' if plan['pruned_same'] else 'DIFFERENT'})\n")  # fmt: skip
    one = statistics.median(run["seconds"] for run in runs[min(runs)])
    print(f"{'workers':>7} | {'submit→result s':>15} | {'speed-up':>8} | {'POST ms':>7} | "
          "Σ chunk s")  # fmt: skip
    for count, count_runs in runs.items():
        seconds = statistics.median(run["seconds"] for run in count_runs)
        post_ms = statistics.median(run["post_ms"] for run in count_runs)
        chunk_s = statistics.median(run["chunk_s"] for run in count_runs)
        print(f"{count:>7} | {seconds:>15.2f} | {one / seconds:>7.2f}x | {post_ms:>7.1f} | "
              f"{chunk_s:>9.1f}")  # fmt: skip
    print(f"\nnotes: medians of {len(every) // len(runs)} plan(s) per worker count. This "
          f"machine has {os.cpu_count()} CPU cores: each solo worker searches on one, so no "
          "speed-up beyond that is expected (gunicorn, PostgreSQL and the polling share them "
          f"too). Load average (1 min) before the worker runs: {plan['load']:.2f}. Σ chunk s: "
          "the chunks' summed time on the workers; it grows when they share cores.")  # fmt: skip
    worst = max(run["post_ms"] for run in every)
    for what, post_ms in (("no worker running, median of 3", plan["quiet_post_ms"]),
                          ("slowest, workers searching", worst)):  # fmt: skip
        verdict = "OK" if post_ms < POST_TARGET_MS else "TOO SLOW"
        print(f"POST ({what}): {post_ms:.1f} ms (target < {POST_TARGET_MS:g} ms: {verdict})")


if __name__ == "__main__":
    main()
