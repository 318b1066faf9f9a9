"""python -m estimator: estimate and catalog, exit codes and streams."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from estimator.core.presets import load_recipes, recipe_scenario

from .scenarios import SMALL, scenario
from .test_catalog import CONTRACT_IDS

ROOT = Path(__file__).resolve().parents[3]


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "estimator", *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_cli_estimate_file_prints_json(tmp_path: Path) -> None:
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(SMALL))
    done = run("estimate", str(path))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["tokens_per_s_per_gpu"] > 0
    assert result["format_version"] == 1


def test_cli_estimate_stdin() -> None:
    done = run("estimate", "-", stdin=json.dumps(SMALL))
    assert done.returncode == 0
    assert json.loads(done.stdout)["parameters"] > 0


def test_cli_estimate_bad_key_exits_2_naming_it() -> None:
    done = run("estimate", "-", stdin=json.dumps(scenario(SMALL, model={"num_layers": -3})))
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == "model.num_layers: must be a positive integer, got -3\n"


def test_cli_estimate_invalid_json_exits_2() -> None:
    done = run("estimate", "-", stdin="{not json")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("scenario: not valid JSON")
    assert done.stderr.count("\n") == 1


def test_cli_estimate_missing_file_exits_2(tmp_path: Path) -> None:
    done = run("estimate", str(tmp_path / "absent.json"))
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("scenario:")


def test_cli_catalog_lists_every_contract_id() -> None:
    done = run("catalog")
    assert done.returncode == 0
    listed = [line.split()[0] for line in done.stdout.splitlines()]
    assert set(CONTRACT_IDS) <= set(listed)
    assert len(listed) == len(set(listed))


@pytest.mark.parametrize(
    ("stdin", "reason"),
    [
        ("[" * 200_000 + "]" * 200_000, "scenario: not valid JSON: nested deeper than 32 levels"),
        ('{"model":' + '{"a":' * 200_000 + "1" + "}" * 200_001, "nested deeper than 32 levels"),
        ('{"model": ' + "9" * 5000 + "}", "scenario: not valid JSON"),
        ("", "scenario: not valid JSON"),
    ],
    ids=["arrays-200000-deep", "objects-200000-deep", "5000-digit-number", "empty"],
)
def test_cli_estimate_unparseable_json_exits_2_with_one_line(stdin: str, reason: str) -> None:
    done = run("estimate", "-", stdin=stdin)
    assert done.returncode == 2
    assert done.stdout == ""
    assert reason in done.stderr
    assert done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr


def test_cli_search_json_nested_too_deeply_exits_2() -> None:
    done = run("search", "-", stdin="[" * 200_000 + "]" * 200_000)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "scenario: not valid JSON: nested deeper than 32 levels\n"


def test_cli_estimate_file_that_is_not_utf8_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "scenario.json"
    path.write_bytes(b'{"model": "\xff"}')
    done = run("estimate", str(path))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "scenario: not UTF-8 text (byte 11)\n"


def qlora_70b_8bit_on_one_l40s() -> dict[str, Any]:
    """The two-L40S QLoRA 70B recipe on one L40S with 8-bit AdamW: over the usable memory
    (43.2 GiB of 48) but within the card."""
    data = recipe_scenario(load_recipes()["llama3-70b-qlora-r64-2xl40s"])
    data["cluster"]["num_gpus"] = 1
    data["training"]["optimizer"] = "adamw8bit"
    return data


def test_cli_estimate_reports_one_memory_verdict_for_a_tight_fine_tune(tmp_path: Path) -> None:
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(qlora_70b_8bit_on_one_l40s()))
    done = run("estimate", str(path))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    total = result["memory_per_gpu_gib"]["total"]
    usable = result["memory_headroom"]["usable_gib"]
    assert usable < total <= result["accelerator_memory_gib"]
    assert result["memory_verdict"] == "tight"
    assert result["fits_in_memory"] is True  # the card holds it; the contract's key stays
    notes = " ".join(result["warnings"])
    assert "tight on memory" in notes
    assert f"{total - usable:.1f} GiB over the {usable:.1f} GiB" in notes
    assert "expect out-of-memory errors" not in notes


def test_cli_estimate_reads_the_planners_export_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "export.json"
    document = {"format": "trainplan-scenario", "version": 1, "name": "S", "scenario": SMALL}
    path.write_text(json.dumps(document))
    done = run("estimate", str(path))
    assert done.returncode == 0, done.stderr
    assert (
        json.loads(done.stdout)["step_time_s"]
        == json.loads(run("estimate", "-", stdin=json.dumps(SMALL)).stdout)["step_time_s"]
    )


def test_cli_estimate_names_the_key_of_a_foreign_document() -> None:
    done = run("estimate", "-", stdin=json.dumps({"format": "other", "scenario": SMALL}))
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("format: must be 'trainplan-scenario'")
