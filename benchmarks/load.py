"""Load test: signed-in users browse the main pages and the API of a production-like stack.

    python benchmarks/load.py [--users 50] [--duration 120] [--think 2 5] [--workers 3]
        [--postgres postgres://postgres@127.0.0.1:5432/postgres] [--redis redis://127.0.0.1:6379/12]
        [--ramp SECONDS] [--plans N] [--worker-nice 0] [--json results.json]

What it starts (and stops, dropping the database, when it ends):

1. a throwaway PostgreSQL database ``trainplan_load_<pid>`` next to ``--postgres``;
2. ``migrate`` and ``load_demo`` on it (tasks in-process, so the demo's runs finish and its
   budget request is submitted), then ``--users`` requesters in the demo organisation;
3. a Celery worker on ``--redis`` at CPU priority ``--worker-nice`` (0, the README's
   production recipe; 10 to compare a niced worker) and gunicorn (``--workers`` sync
   workers) on a free port, with production settings (``DEBUG`` off, the real password
   hasher), plain http.

``--plans N`` submits N capacity plans (the demo's question) through the API as the load
starts, so the pages are timed while the worker searches; the report says how many finished
during the load. ``--think 0 0`` measures saturation.

Each user signs in through the login form (timed as ``login``), then until ``--duration``
has passed opens a page or an API list at random, waiting ``--think`` seconds (uniform)
between requests. Users start spread over ``--ramp`` seconds (default: the longest think).
The report gives, per page: requests, requests/s, p50/p95/p99 latency [ms] and errors (a
status >= 400, a redirect or no answer), and the SQL queries that page makes (counted once
per page, in-process, before the load starts; ``tests/planner/test_query_counts.py``
checks that they stay constant as the data grows). It does so for the whole run and for its
steady state, the requests sent after the last login ended: a login hashes the password
(PBKDF2: the report prints what one check costs) in a sync worker, so a burst of logins
queues every page behind it.

Needs PostgreSQL and Redis; the client is threads and ``requests`` (a dev dependency). The
servers' logs go to ``var/load/``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
PASSWORD = "load-test-pass"  # noqa: S105 (throwaway users of a throwaway database)
CSRF_FIELD = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
# The demo's requester (planner/demo.py's published login), who submits --plans.
PLANNER, PLANNER_PASSWORD = "maya", "maya-demo-pass"


# --- The stack ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def database_url(server: str, name: str) -> str:
    return urlunsplit(urlsplit(server)._replace(path=f"/{name}"))


@contextmanager
def throwaway_database(server: str) -> Iterator[str]:
    import psycopg

    name = f"trainplan_load_{os.getpid()}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield database_url(server, name)
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def stack_env(database: str, redis: str | None) -> dict[str, str]:
    """Production settings over plain http on the loopback."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "trainplan.settings",
        "DATABASE_URL": database,
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost,testserver",
        "DJANGO_SECURE_SSL_REDIRECT": "0",
        "DJANGO_SECURE_COOKIES": "0",
        "DJANGO_SECURE_HSTS_SECONDS": "0",
    }
    env.pop("REDIS_URL", None)
    if redis:
        env["REDIS_URL"] = redis
    return env


def prepare(database: str, users: int) -> dict[str, Any]:
    """Migrate, load the demo, add the users; the pages to visit and their query counts."""
    env = stack_env(database, redis=None)  # eager tasks: the demo's runs finish here
    manage = [PYTHON, "manage.py"]
    subprocess.run([*manage, "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
    subprocess.run([*manage, "load_demo"], cwd=ROOT, env=env, check=True, capture_output=True)
    command = [PYTHON, __file__, "_prepare", "--users", str(users)]
    done = subprocess.run(command, cwd=ROOT, env=env, check=True, capture_output=True, text=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@contextmanager
def started(
    command: list[str], env: dict[str, str], log: Path, *, nice: int = 0
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``command`` until the block ends, at CPU priority ``nice`` (0: the same as ours)."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=(lambda: os.nice(nice)) if nice else None,
        )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()


def wait_until_up(base: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if requests.get(f"{base}/livez", timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.5)
    raise SystemExit(f"gunicorn did not answer at {base} within {timeout_s} s")


# --- Inside Django (the ``_prepare`` step) --------------------------------------------------


def _first(queryset: Any) -> Any:
    found = queryset.first()
    if found is None:
        raise SystemExit(f"the demo data has no {queryset.model.__name__}")
    return found


def _pages() -> dict[str, str]:
    """Page name -> path, on the demo data."""
    from planner.budgets.models import BudgetRequest
    from planner.scenarios.models import Comparison, EstimationRun, Project, Scenario
    from pricing.models import PriceBook

    project = _first(Project.objects.order_by("pk"))
    scenario = _first(Scenario.objects.filter(project=project).order_by("pk"))
    run = _first(EstimationRun.objects.filter(status="succeeded").order_by("pk"))
    request = _first(BudgetRequest.objects.order_by("pk"))
    book = _first(PriceBook.objects.filter(status="published").order_by("pk"))
    comparison = Comparison.objects.order_by("pk").first()
    pages = {
        "dashboard": "/",
        "project": f"/projects/{project.pk}/",
        "project compare": f"/projects/{project.pk}/compare/",
        "scenario": f"/scenarios/{scenario.pk}/",
        "run": f"/runs/{run.pk}/",
        "compare across": "/compare/",
        "budgets": "/budgets/",
        "budget request": f"/budgets/{request.pk}/",
        "pricing catalog": "/pricing/catalog/",
        "price books": "/pricing/books/",
        "price book": f"/pricing/books/{book.pk}/",
        "api projects": "/api/v1/projects/",
        "api scenarios": "/api/v1/scenarios/",
        "api runs": "/api/v1/runs/",
        "api budgets": "/api/v1/budgets/",
    }
    if comparison is not None:
        pages["comparison"] = f"/comparisons/{comparison.pk}/"
    return pages


def _users_create(count: int) -> list[str]:
    from django.contrib.auth.models import User

    from organisations.models import Organisation, Role
    from organisations.services import membership_grant

    organisation = Organisation.objects.order_by("pk").first()
    assert organisation is not None
    names = []
    for number in range(count):
        user = User.objects.create_user(f"load{number:03d}", password=PASSWORD)
        membership_grant(organisation=organisation, user=user, role=Role.REQUESTER)
        names.append(user.username)
    return names


def _query_counts(pages: dict[str, str], username: str) -> dict[str, int]:
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client()
    client.force_login(User.objects.get(username=username))
    counts = {}
    for name, path in pages.items():
        client.get(path)  # warm caches that a steady state has warm
        with CaptureQueriesContext(connection) as captured:
            status = client.get(path).status_code
        assert status == 200, f"{path}: {status}"
        counts[name] = len(captured.captured_queries)
    return counts


def _password_check_ms(username: str) -> float:
    from django.contrib.auth.models import User

    user = User.objects.get(username=username)
    start = time.perf_counter()
    assert user.check_password(PASSWORD)
    return (time.perf_counter() - start) * 1000


def prepare_inside(users: int) -> None:
    import django

    sys.path.insert(0, str(ROOT))
    django.setup()
    names = _users_create(users)
    pages = _pages()
    result = {
        "users": names,
        "pages": pages,
        "queries": _query_counts(pages, names[0]),
        "password_check_ms": _password_check_ms(names[0]),
    }
    print(json.dumps(result))


# --- The load -------------------------------------------------------------------------------


@dataclass
class Results:
    """Every request as (page, started at [monotonic s], latency [s], error or None)."""

    samples: list[tuple[str, float, float, str | None]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, name: str, started_at: float, error: str | None) -> None:
        with self.lock:
            self.samples.append((name, started_at, time.monotonic() - started_at, error))


def timed_get(session: requests.Session, base: str, name: str, path: str, results: Results) -> None:
    start = time.monotonic()
    error = None
    try:
        response = session.get(base + path, timeout=30, allow_redirects=False)
        if response.status_code >= 400 or response.status_code in (301, 302):
            error = f"{path} -> {response.status_code}"
    except requests.RequestException as failure:
        error = f"{path} -> {type(failure).__name__}"
    results.record(name, start, error)


def login(session: requests.Session, base: str, username: str, results: Results) -> bool:
    start = time.monotonic()
    try:
        form = session.get(f"{base}/accounts/login/", timeout=30)
        token = CSRF_FIELD.search(form.text)
        answer = session.post(
            f"{base}/accounts/login/",
            data={
                "username": username,
                "password": PASSWORD,
                "csrfmiddlewaretoken": token.group(1) if token else "",
            },
            headers={"Referer": f"{base}/accounts/login/"},
            timeout=30,
            allow_redirects=False,
        )
        error = None if answer.status_code == 302 else f"login -> {answer.status_code}"
    except requests.RequestException as failure:
        error = f"login -> {type(failure).__name__}"
    results.record("login", start, error)
    return error is None


def user_loop(
    base: str,
    username: str,
    pages: dict[str, str],
    think: tuple[float, float],
    start_delay_s: float,
    stop_at: float,
    results: Results,
) -> None:
    rng = random.Random(username)  # a reproducible browse, not cryptography
    time.sleep(start_delay_s)
    with requests.Session() as session:
        if not login(session, base, username, results):
            return
        names = list(pages)
        while time.monotonic() < stop_at:
            name = rng.choice(names)
            timed_get(session, base, name, pages[name], results)
            time.sleep(rng.uniform(*think))


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))
    return ordered[index]


def _row(values: list[float], errors: int, duration_s: float) -> dict[str, Any]:
    return {
        "requests": len(values),
        "rps": len(values) / duration_s,
        "p50_ms": percentile(values, 0.50) * 1000 if values else 0.0,
        "p95_ms": percentile(values, 0.95) * 1000 if values else 0.0,
        "p99_ms": percentile(values, 0.99) * 1000 if values else 0.0,
        "errors": errors,
    }


def report(
    samples: list[tuple[str, float, float, str | None]], duration_s: float, queries: dict[str, int]
) -> dict[str, Any]:
    """Per page and for all pages together (logins left out of the total)."""
    by_page: dict[str, list[float]] = defaultdict(list)
    errors: dict[str, int] = defaultdict(int)
    for name, _, seconds, error in samples:
        by_page[name].append(seconds)
        errors[name] += error is not None
    rows = {
        name: _row(by_page[name], errors[name], duration_s) | {"queries": queries.get(name)}
        for name in sorted(by_page)
    }
    pages = [seconds for name, _, seconds, _ in samples if name != "login"]
    total = _row(pages, sum(n for name, n in errors.items() if name != "login"), duration_s)
    return {"duration_s": duration_s, "pages": rows, "total (pages)": total}


def summarise(
    results: Results, start: float, end: float, queries: dict[str, int]
) -> dict[str, Any]:
    """The whole run, and its steady state: the requests sent after the last login ended."""
    logins_end = max(
        (at + seconds for name, at, seconds, _ in results.samples if name == "login"), default=start
    )
    steady = [sample for sample in results.samples if sample[1] >= logins_end]
    errors = [f"{name}: {error}" for name, _, _, error in results.samples if error]
    return {
        "whole run": report(results.samples, end - start, queries),
        "steady state (after the last login)": report(steady, end - logins_end, queries),
        "error_samples": errors[:10],
    }


def print_report(title: str, summary: dict[str, Any]) -> None:
    print(f"\n{title}: {summary['duration_s']:.0f} s")
    header = f"{'page':<18} {'reqs':>6} {'req/s':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}"
    print(f"{header} {'errors':>6} {'queries':>7}")
    rows = summary["pages"] | {"TOTAL (pages)": summary["total (pages)"]}
    for name, row in rows.items():
        queries = "" if row.get("queries") is None else str(row["queries"])
        print(
            f"{name:<18} {row['requests']:>6} {row['rps']:>7.2f} {row['p50_ms']:>8.1f} "
            f"{row['p95_ms']:>8.1f} {row['p99_ms']:>8.1f} {row['errors']:>6} {queries:>7}"
        )


def plans_submit(base: str, count: int) -> list[str]:
    """Submit ``count`` capacity plans (the demo's question: Llama 3 70B on 2T tokens, up
    to 16,384 GPUs, the newest published book, every quote and on-prem profile) as maya,
    the demo's requester, through the API; their URLs."""
    if not count:
        return []
    with requests.Session() as api:
        login = {"username": PLANNER, "password": PLANNER_PASSWORD}
        token = api.post(f"{base}/api/v1/auth/token/", json=login, timeout=30).json()["token"]
        api.headers["Authorization"] = f"Token {token}"
        deadline = (date.today() + timedelta(days=200)).isoformat()
        body: dict[str, Any] = {"model_preset": "llama3-70b", "tokens": "2T",
                                "deadline": deadline, "budget": "9000000", "currency": "USD",
                                "max_gpus": 16_384}  # fmt: skip
        urls = []
        for _ in range(count):
            answer = api.post(f"{base}/api/v1/capacity-plans/", json=body, timeout=30)
            answer.raise_for_status()
            urls.append(f"{base}/api/v1/capacity-plans/{answer.json()['id']}/")
        return urls


def plans_finished(urls: list[str]) -> int:
    """How many of the plans at ``urls`` have finished (each asked once, as maya)."""
    if not urls:
        return 0
    with requests.Session() as api:
        login = {"username": PLANNER, "password": PLANNER_PASSWORD}
        base = urls[0].split("/api/")[0]
        token = api.post(f"{base}/api/v1/auth/token/", json=login, timeout=30).json()["token"]
        api.headers["Authorization"] = f"Token {token}"
        states = [api.get(url, timeout=30).json()["status"] for url in urls]
    return sum(state in ("succeeded", "failed", "cancelled") for state in states)


def run_load(args: argparse.Namespace, base: str, plan: dict[str, Any]) -> dict[str, Any]:
    results = Results()
    plans = plans_submit(base, args.plans)
    think = (args.think[0], args.think[1])
    ramp_s = think[1] if args.ramp is None else args.ramp
    start = time.monotonic()
    stop_at = start + args.duration
    threads = [
        threading.Thread(
            target=user_loop,
            args=(base, name, plan["pages"], think, i * ramp_s / len(plan["users"]), stop_at),
            kwargs={"results": results},
            daemon=True,
        )
        for i, name in enumerate(plan["users"])
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=args.duration + 60)
    summary = summarise(results, start, time.monotonic(), plan["queries"])
    summary["plans"] = {"submitted": len(plans), "finished_during_load": plans_finished(plans)}
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--duration", type=float, default=120.0, help="seconds of load")
    parser.add_argument("--think", type=float, nargs=2, default=(2.0, 5.0), metavar=("MIN", "MAX"))
    parser.add_argument(
        "--ramp", type=float, help="seconds over which users start (default: think MAX)"
    )
    parser.add_argument("--workers", type=int, default=3, help="gunicorn workers")
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/12")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--plans", type=int, default=0, help="capacity plans submitted as the load starts"
    )
    parser.add_argument(
        "--worker-nice",
        type=int,
        default=0,
        help="the Celery worker's CPU priority (nice; 0: as the web, as the README's recipe)",
    )
    args = parser.parse_args()
    logs = ROOT / "var" / "load"
    logs.mkdir(parents=True, exist_ok=True)
    with throwaway_database(args.postgres) as database:
        print(f"database {database}: migrate, load_demo, {args.users} users", flush=True)
        plan = prepare(database, args.users)
        env = stack_env(database, args.redis)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        worker = [PYTHON, "-m", "celery", "-A", "trainplan", "worker", "--concurrency=1",
                  "--loglevel=WARNING", "-n", f"load-{os.getpid()}@%h"]  # fmt: skip
        gunicorn = [PYTHON, "-m", "gunicorn", "trainplan.wsgi", "--bind", f"127.0.0.1:{port}",
                    "--workers", str(args.workers), "--access-logfile", "-"]  # fmt: skip
        with (
            started(worker, env, logs / "celery.log", nice=args.worker_nice),
            started(gunicorn, env, logs / "gunicorn.log"),
        ):
            wait_until_up(base)
            print(f"gunicorn ({args.workers} workers) at {base}; {args.users} users for "
                  f"{args.duration:.0f} s, think {think_text(args)} s; worker nice "
                  f"{args.worker_nice}, {args.plans} capacity plan(s)", flush=True)  # fmt: skip
            summary = run_load(args, base, plan)
    print(f"one password check (the login's hasher): {plan['password_check_ms']:.0f} ms")
    for title in ("whole run", "steady state (after the last login)"):
        print_report(title, summary[title])
    for sample in summary["error_samples"]:
        print(f"  error: {sample}")
    plans = summary["plans"]
    if plans["submitted"]:
        print(f"capacity plans: {plans['submitted']} submitted as the load started, "
              f"{plans['finished_during_load']} finished during it")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")


def think_text(args: argparse.Namespace) -> str:
    return f"{args.think[0]:g}-{args.think[1]:g}"


if __name__ == "__main__":
    if sys.argv[1:2] == ["_prepare"]:
        prepare_inside(int(sys.argv[sys.argv.index("--users") + 1]))
    else:
        main()
