"""Fuzz the whole REST API with schemathesis, as each demo role, against a live server.

``.ci/run`` calls this after the test suite. It builds a throwaway database (SQLite in a
temporary folder, or with ``--database-url`` that PostgreSQL database, dropped and created
afresh), loads the demo data, serves the app with gunicorn as in production (``DEBUG`` off,
eager Celery) and runs schemathesis over every operation of ``/api/schema/`` as ``maya``
(requester), ``finn`` (approver) and ``ivan`` (pricing admin), checking that nothing answers
5xx (``not_a_server_error``) and that every status is documented
(``status_code_conformance``). Exits 1 when schemathesis finds anything.

    .venv/bin/python scripts/schemathesis_check.py
    .venv/bin/python scripts/schemathesis_check.py --database-url postgres://postgres@127.0.0.1:5432/fuzz
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
USERS = ("maya", "finn", "ivan")  # requester, approver, pricing admin
CHECKS = "not_a_server_error,status_code_conformance"
SERVER_START_TIMEOUT_S = 60


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_env(var_dir: Path, database_url: str | None) -> dict[str, str]:
    """Production settings over plain http on localhost, with eager Celery."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}
    }
    env.update(
        DJANGO_DEBUG="0",
        DJANGO_SECURE_SSL_REDIRECT="0",
        DJANGO_SECURE_COOKIES="0",
        DJANGO_SECURE_HSTS_SECONDS="0",
        DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
        DJANGO_EMAIL_BACKEND="django.core.mail.backends.locmem.EmailBackend",
        TRAINPLAN_VAR_DIR=str(var_dir),
        PYTHONUNBUFFERED="1",
        # The fuzzer logs in thousands of times from one address: lift the login limits so
        # it explores the token endpoint, not the lockout (tests cover that), and so each
        # demo user still gets a token after the one before fuzzed.
        TRAINPLAN_LOGIN_RATE="100000/min",
        TRAINPLAN_LOGIN_MAX_FAILURES_PER_ADDRESS="100000",
        TRAINPLAN_LOGIN_MAX_FAILURES_PER_USERNAME="100000",
    )
    if database_url:
        env["DATABASE_URL"] = database_url
    return env


def database_recreate(database_url: str) -> None:
    """Drop and create the PostgreSQL database the URL names: the fuzzer writes to it."""
    import psycopg
    from psycopg import sql

    parts = urlsplit(database_url)
    name = parts.path.lstrip("/")
    if not name or name in {"postgres", "template0", "template1"}:
        sys.exit(f"--database-url must name a throwaway database, got {name!r}")
    maintenance = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(maintenance, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def manage(env: dict[str, str], *args: str) -> None:
    subprocess.run([str(BIN / "python"), "manage.py", *args], cwd=ROOT, env=env, check=True)


def server_errors(log_path: Path, limit: int = 6_000) -> str:
    """The ERROR records of the server log, each with the traceback lines that follow it:
    what a 500 was, which the log's tail alone may no longer hold."""
    records: list[str] = []
    current: list[str] | None = None
    for line in log_path.read_text(errors="replace").splitlines():
        starts_record = line[:4].isdigit() or line.startswith("[")
        if starts_record:
            if current:
                records.append("\n".join(current))
            current = [line] if " ERROR " in line else None
        elif current is not None:
            current.append(line)
    if current:
        records.append("\n".join(current))
    return "\n".join(records)[:limit] or "(none logged)"


@contextmanager
def live_server(env: dict[str, str], log_path: Path) -> Iterator[str]:
    """gunicorn on a free port, one process with threads (SQLite allows one writer), keeping
    idle connections open."""
    port = free_port()
    command = [
        str(BIN / "gunicorn"),
        "trainplan.wsgi",
        f"--bind=127.0.0.1:{port}",
        "--workers=1",
        "--threads=4",
        "--timeout=120",
        # gunicorn closes a connection idle for 2 s by default; schemathesis keeps its
        # connections open between requests and may pause longer than that while it
        # generates data, and a request sent just as the server closes its connection fails
        # as a network error (the keep-alive race). A precaution: keep idle connections for
        # longer than the fuzzer pauses.
        "--keep-alive=120",
    ]
    with log_path.open("wb") as log:
        server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}"
    try:
        wait_until_live(base_url, server)
        yield base_url
    finally:
        server.terminate()
        server.wait(timeout=30)


def wait_until_live(base_url: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while time.monotonic() < deadline and server.poll() is None:
        try:
            with urllib.request.urlopen(f"{base_url}/livez", timeout=2):  # noqa: S310
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"the server at {base_url} did not come up")


def token_for(base_url: str, username: str) -> str:
    body = json.dumps({"username": username, "password": f"{username}-demo-pass"}).encode()
    request = urllib.request.Request(  # noqa: S310 (our own server on localhost)
        f"{base_url}/api/v1/auth/token/",
        data=body,
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        return str(json.load(response)["token"])


def schemathesis(
    base_url: str, token: str, options: argparse.Namespace, work_dir: Path
) -> tuple[int, str]:
    """Run schemathesis, echoing its output as it comes; its exit status and the output."""
    command = [
        str(BIN / "schemathesis"),
        "run",
        f"{base_url}/api/schema/",
        f"--checks={CHECKS}",
        f"--header=Authorization: Token {token}",
        # Logging out or revoking (the fuzzer reuses ids it read, its token's too) would leave
        # it with its own token revoked and nothing but 401s.
        "--exclude-path-regex=/auth/(logout|tokens/.)",
        f"--max-examples={options.max_examples}",
        f"--phases={options.phases}",
        f"--workers={options.workers}",
        "--request-timeout=60",
        "--generation-database=none",
        "--no-color",
        *(["--seed", str(options.seed)] if options.seed is not None else []),
    ]
    # Run in the user's own throwaway folder: schemathesis keeps its cache in ./.schemathesis.
    lines: list[str] = []
    with subprocess.Popen(
        command, cwd=work_dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            sys.stdout.write(line)
            lines.append(line)
    sys.stdout.flush()
    return process.returncode, "".join(lines)


SECTION = re.compile(r"^=+ (?P<name>[^=\s][^=]*?) =+$")


def sections(output: str) -> list[tuple[str, str]]:
    """schemathesis's output split at its ``=== NAME ===`` rules: (name, text) pairs, the
    text before the first rule (the header and one line per phase) named ``""``."""
    parts: list[tuple[str, list[str]]] = [("", [])]
    for line in output.splitlines(keepends=True):
        match = SECTION.match(line.strip())
        if match:
            parts.append((match["name"], []))
        parts[-1][1].append(line)
    return [(name, "".join(lines)) for name, lines in parts if lines]


def findings(output: str, limit: int = 8_000) -> str:
    """What schemathesis reported, without its advice: the header with each phase's outcome,
    the FAILURES and ERRORS sections (cut to ``limit`` characters together), then the SUMMARY
    and the closing line in full. The WARNINGS section (links it could not follow, schema
    mismatches) is left out: it is the same on a green run and would push the rest out of a
    log cut to its head and tail."""
    body: list[str] = []
    summary: list[str] = []
    for name, text in sections(output):
        if name == "WARNINGS":
            continue
        (summary if summary or name == "SUMMARY" else body).append(text)
    found = "".join(body)
    if len(found) > limit:
        found = found[:limit] + "\n[...]\n"
    return found + "".join(summary)


def digest(output: str, max_lines: int = 14) -> str:
    """A few lines that say what failed, for the very end of a CI log that keeps only its last
    few dozen lines: the first ``max_lines`` non-blank lines of the ERRORS and FAILURES
    sections, then the summary's ``Failures:`` and ``Errors:`` counts."""
    found: list[str] = []
    counts: list[str] = []
    for name, text in sections(output):
        lines = [line.rstrip() for line in text.splitlines()[1:] if line.strip()]
        if name in {"ERRORS", "FAILURES"}:
            found += [name, *lines[:max_lines]]
        elif name == "SUMMARY":
            counts = [
                line for line in lines if line.startswith(("Failures:", "Errors:", "  ❌", "  🚫"))
            ]
    return "\n".join(found + counts) or findings(output)[-1_500:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", help="a throwaway PostgreSQL database (default SQLite)")
    parser.add_argument("--max-examples", type=int, default=5, help="cases per operation")
    parser.add_argument("--phases", default="examples,coverage,fuzzing")
    parser.add_argument("--workers", default="2", help="concurrent schemathesis workers")
    parser.add_argument("--seed", type=int, help="reproduce an earlier run")
    parser.add_argument("--users", default=",".join(USERS), help="demo users to fuzz as")
    options = parser.parse_args()

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="trainplan-fuzz-") as tmp:
        var_dir = Path(tmp)
        env = server_env(var_dir, options.database_url)
        if options.database_url:
            database_recreate(options.database_url)
        manage(env, "migrate", "--noinput", "-v0")
        manage(env, "load_demo")
        log_path = var_dir / "server.log"
        failed: dict[str, str] = {}
        with live_server(env, log_path) as base_url:
            for username in options.users.split(","):
                print(f"\n=== schemathesis as {username} against {base_url}", flush=True)
                token = token_for(base_url, username)
                # A folder of its own: schemathesis keeps a cache in ./.schemathesis and
                # replays the requests cached there (the ids they created) in the next run,
                # which would carry one user's objects into the next user's run.
                work_dir = var_dir / f"schemathesis-{username}"
                work_dir.mkdir()
                code, output = schemathesis(base_url, token, options, work_dir)
                if code != 0:
                    failed[username] = output
        if failed:
            # Last, so that a CI log cut to its head and tail still shows what failed.
            print(f"\n--- server log (last 3000 characters)\n{log_path.read_text()[-3000:]}")
            print(f"\n--- server errors with their tracebacks\n{server_errors(log_path)}")
            for username, output in failed.items():
                print(f"\n--- what schemathesis found as {username}\n{findings(output)}")
            for username, output in failed.items():
                print(f"\n--- in short, as {username}\n{digest(output)}")
    elapsed = time.monotonic() - started
    outcome = f"findings as {', '.join(failed)}" if failed else "no findings"
    print(f"\n[schemathesis_check] {outcome} in {elapsed:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
