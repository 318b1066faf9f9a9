"""estimator.calibration.finetune_checks: the estimator against published fine-tuning
figures (QLoRA paper, torchtune, PEFT, ...), each within the tolerance its row states."""

from __future__ import annotations

import pytest

from estimator.calibration import finetune_checks as checks
from estimator.core import validate_scenario

ROWS = checks.load_checks()
BY_ID = {row["id"]: row for row in ROWS}
ASSERTED = [row["id"] for row in ROWS if row.get("check") and row["check"]["asserted"]]


def test_every_row_names_its_source_and_quotes_it() -> None:
    assert len(BY_ID) == len(ROWS)
    for row in ROWS:
        assert len(row["source"]) > 20, row["id"]
        assert row["quote"], row["id"]
        if row.get("check"):
            validate_scenario(row["check"]["scenario"])
            assert row["check"]["assumptions"], row["id"]


def test_the_published_headlines_are_asserted() -> None:
    # The two headlines: QLoRA fits a 65B model on one 48 GB card; full 16-bit
    # fine-tuning of it needs more than 780 GB.
    assert {"qlora_paper_65b_single_48gb", "qlora_paper_65b_full16_over_780gb"} <= set(ASSERTED)
    assert len(ASSERTED) >= 6


@pytest.mark.parametrize("row_id", ASSERTED)
def test_asserted_rows_hold(row_id: str) -> None:
    result = checks.evaluate(BY_ID[row_id], BY_ID)
    check = result.check
    assert result.ok, (row_id, check["published"], result.predicted, result.error)
    if check.get("tolerance") is not None:
        assert result.error is not None
        assert abs(result.error) <= check["tolerance"]


def test_reported_rows_evaluate_and_say_why_they_are_not_asserted() -> None:
    for row in ROWS:
        if row.get("check") and not row["check"]["asserted"]:
            result = checks.evaluate(row, BY_ID)
            assert result.predicted is not None
            assert len(row["check"]["assumptions"]) > 30, row["id"]
