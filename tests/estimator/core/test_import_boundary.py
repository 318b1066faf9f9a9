"""estimator.core and estimator.calibration must import, and work, with Django and Celery
unimportable."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
#: The pure packages: stdlib and numpy only, nothing of the web app.
PACKAGES = ("estimator.core", "estimator.calibration")

#: Imports the package and every module below it (``estimator.calibration`` imports none
#: of its modules itself), printing nothing.
IMPORT_ALL = textwrap.dedent(
    """
    import importlib, pkgutil
    package = importlib.import_module(PACKAGE)
    for module in pkgutil.walk_packages(package.__path__, PACKAGE + "."):
        importlib.import_module(module.name)
    """
)

PROBE = textwrap.dedent(
    """
    import sys
    for name in ("django", "celery", "rest_framework", "planner", "pricing"):
        sys.modules[name] = None  # any import of these now raises ImportError
    IMPORT_ALL
    from estimator.core import estimate, load_catalog
    assert load_catalog()
    leaked = sorted(m for m, mod in sys.modules.items() if mod is not None and
                    m.split(".")[0] in {"django", "celery", "rest_framework", "planner",
                                        "pricing"})
    print(",".join(leaked))
    """
)


def _run(package: str, probe: str, check: bool) -> subprocess.CompletedProcess[str]:
    code = f"PACKAGE = {package!r}\n" + probe.replace("IMPORT_ALL", IMPORT_ALL)
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=check,
    )


@pytest.mark.parametrize("package", PACKAGES)
def test_pure_package_imports_without_django(package: str) -> None:
    done = _run(package, PROBE, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


@pytest.mark.parametrize("package", PACKAGES)
def test_pure_package_imports_only_stdlib_and_numpy(package: str) -> None:
    probe = (
        "import sys; before = set(sys.modules)\nIMPORT_ALL\n"
        "print('\\n'.join(sorted(set(sys.modules) - before)))"
    )
    done = _run(package, probe, check=True)
    roots = {name.split(".")[0] for name in done.stdout.split()}
    third_party = roots - set(sys.stdlib_module_names) - {"estimator", "numpy"}
    assert not {r for r in third_party if not r.startswith("_")}, third_party
