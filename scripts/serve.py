"""Serve the embedded default as production runs: the web server and a Celery worker with beat.

``make run`` calls this after migrating and loading the demo. Without ``REDIS_URL`` the tasks
go through a broker kept in files under ``var/broker`` (kombu's filesystem transport, set by
``TRAINPLAN_LOCAL_WORKER=1``), so pages answer at once and runs, capacity plans and sign-off
packs show their progress while the worker does them; beat runs the dispatcher that resends
what was missed. With ``REDIS_URL`` set the worker uses Redis instead.

Ctrl-C (or SIGTERM) stops both: each gets SIGTERM (the worker finishes the tasks in hand),
and whatever still runs after ``STOP_GRACE_S`` is killed. When either stops on its own, the
other is stopped too, and this exits with the first one's status.

    python scripts/serve.py [ADDRESS:PORT]
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ADDRESS = "127.0.0.1:8000"
#: How long each process may take to stop after SIGTERM before it is killed [s].
STOP_GRACE_S = 10.0
POLL_S = 0.2


def commands(address: str, var_dir: Path) -> dict[str, list[str]]:
    """The web server's and the worker's command lines, by name."""
    python = sys.executable
    return {
        "web": [python, str(ROOT / "manage.py"), "runserver", address],
        "worker": [
            python,
            "-m",
            "celery",
            "-A",
            "trainplan",
            "worker",
            "--beat",
            "--schedule",
            str(var_dir / "celerybeat-schedule"),
            "--hostname",
            "embedded@%h",
            "--loglevel",
            "INFO",
            # One worker on this machine: nobody to sync with or gossip to at start.
            "--without-mingle",
            "--without-gossip",
        ],
    }


def signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    """Send ``signum`` to the process and its children (the reloader's server, the worker's
    pool and beat): each runs in a session of its own."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signum)


def stop(processes: dict[str, subprocess.Popen[bytes]]) -> None:
    """Ask each to stop, then kill what outlives ``STOP_GRACE_S``.

    The web server's whole group gets SIGTERM (the autoreloader's parent would leave its
    serving child behind); the worker's main process alone gets it, so it stops its pool
    itself once the tasks in hand are done (a pool process signalled directly would drop
    its task).
    """
    for name, process in processes.items():
        if name == "worker":
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
        else:
            signal_group(process, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    for name, process in processes.items():
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            print(f"[serve] the {name} did not stop in {STOP_GRACE_S:.0f} s: killed", flush=True)
        signal_group(process, signal.SIGKILL)  # what it left behind, if anything
        process.wait()


def main(argv: list[str]) -> int:
    address = argv[0] if argv else DEFAULT_ADDRESS
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "trainplan.settings")
    if not env.get("TRAINPLAN_LOCAL_WORKER"):
        env["TRAINPLAN_LOCAL_WORKER"] = "1"
    var_dir = Path(env.get("TRAINPLAN_VAR_DIR") or ROOT / "var")
    var_dir.mkdir(parents=True, exist_ok=True)
    broker = "Redis" if env.get("REDIS_URL") else f"a broker in {var_dir / 'broker'}"
    print(
        f"[serve] http://{address}/ with a Celery worker and beat on {broker}; Ctrl-C stops both.",
        flush=True,
    )

    stopping = False

    def on_signal(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    processes = {
        # A session each: Ctrl-C reaches only this process, which stops both in order.
        name: subprocess.Popen(command, cwd=ROOT, env=env, start_new_session=True)
        for name, command in commands(address, var_dir).items()
    }
    status = 0
    while not stopping:
        ended = {name: p.returncode for name, p in processes.items() if p.poll() is not None}
        if ended:
            name, status = next(iter(ended.items()))
            print(
                f"[serve] the {name} stopped (exit status {status}): stopping the rest", flush=True
            )
            break
        time.sleep(POLL_S)
    stop(processes)
    print("[serve] stopped the web server and the worker", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
