"""The house's floors: no package imports one above its own (docs/architecture.md).

From the ground up: ``estimator`` (the pure core and its calibration), ``lib`` (plumbing),
``organisations``, ``pricing``, ``planner``, ``trainplan`` (the project package). Every
import counts, at module level or inside a function, absolute or relative; strict floors
also rule out any cycle between packages.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FLOORS = {"estimator": 0, "lib": 1, "organisations": 2, "pricing": 3, "planner": 4, "trainplan": 5}


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported_modules(path: Path, root: Path) -> set[str]:
    """Every module ``path`` imports, relative imports resolved against its package."""
    module = _module_name(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                found.add(".".join([*base, *([node.module] if node.module else [])]))
            elif node.module:
                found.add(node.module)
    return found


def floor_violations(root: Path) -> list[str]:
    """``"file: imported module"`` for each import of a floor above the file's own."""
    violations = []
    for package, floor in FLOORS.items():
        for path in sorted((root / package).rglob("*.py")):
            for imported in sorted(_imported_modules(path, root)):
                above = FLOORS.get(imported.split(".")[0], -1)
                if above > floor:
                    violations.append(f"{path.relative_to(root)}: {imported}")
    return violations


def test_no_package_imports_a_floor_above_its_own() -> None:
    assert floor_violations(ROOT) == []


@pytest.mark.parametrize(
    ("path", "source"),
    [
        ("pricing/views.py", "from planner.models import Scenario\n"),
        ("organisations/services.py", "def f():\n    from pricing import models\n"),
        ("lib/money.py", "import organisations.models\n"),
        ("estimator/core/x.py", "from lib.money import MONEY_PLACES\n"),
        ("planner/services/runs.py", "from ...trainplan import celery\n"),
    ],
)
def test_a_deliberate_violation_is_caught(tmp_path: Path, path: str, source: str) -> None:
    for package in FLOORS:
        (tmp_path / package).mkdir()
    target = tmp_path / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(source, encoding="utf-8")
    assert len(floor_violations(tmp_path)) == 1


def test_imports_of_the_same_or_a_lower_floor_pass(tmp_path: Path) -> None:
    for package in FLOORS:
        (tmp_path / package).mkdir()
    (tmp_path / "planner" / "views.py").write_text(
        "from pricing.models import PriceBook\nfrom . import selectors\nimport estimator.core\n"
    )
    (tmp_path / "trainplan" / "urls.py").write_text("from planner import views\n")
    assert floor_violations(tmp_path) == []
