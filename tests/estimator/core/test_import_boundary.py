"""estimator.core must import, and work, with Django and Celery unimportable."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

PROBE = textwrap.dedent(
    """
    import sys
    for name in ("django", "celery", "rest_framework", "planner", "pricing"):
        sys.modules[name] = None  # any import of these now raises ImportError
    import estimator.core
    from estimator.core import estimate, load_catalog
    assert load_catalog()
    leaked = sorted(m for m, mod in sys.modules.items() if mod is not None and
                    m.split(".")[0] in {"django", "celery", "rest_framework", "planner",
                                        "pricing"})
    print(",".join(leaked))
    """
)


def test_estimator_core_imports_without_django() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


def test_estimator_core_imports_only_stdlib_and_numpy() -> None:
    probe = (
        "import sys; before = set(sys.modules); import estimator.core; "
        "print('\\n'.join(sorted(set(sys.modules) - before)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    roots = {name.split(".")[0] for name in done.stdout.split()}
    third_party = roots - set(sys.stdlib_module_names) - {"estimator", "numpy"}
    assert not {r for r in third_party if not r.startswith("_")}, third_party
