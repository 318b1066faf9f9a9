"""The whole bill against hand-worked numbers (no database).

A GB is 2^30 = 1,073,741,824 bytes, as the clouds bill it; every amount is rounded half up
to the cent.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from estimator.core.estimate import estimate as estimator_estimate
from estimator.core.goodput import CHECKPOINT_BYTES_PER_PARAMETER
from planner.common.errors import PlannerError
from planner.scenarios.bill import BILLED_GB_BYTES, checkpoint_size, input_pipeline, whole_bill
from tests.estimator.core.scenarios import SMALL

GB = 1_073_741_824

#: Llama 3 8B trained in full, bf16 mixed precision with AdamW, on 64 GPUs at 1e6 tokens/s.
LLAMA3_8B: dict[str, Any] = {
    "parameters": 8.03e9,
    "training_method": {
        "type": "full",
        "optimizer": "adamw",
        "master_weights": True,
        "trainable_parameters": 8.03e9,
    },
    "mfu_peak": {"precision": "bf16", "tflops": 989.4},
    "tokens_per_s": 1_000_000.0,
    "tokens_per_s_per_gpu": 15_625.0,  # 1e6 / 64
}


def _bill(**changes: Any) -> Any:
    arguments: dict[str, Any] = {
        "estimate": LLAMA3_8B,
        "tokens": 2e12,
        "storage_price_per_gb_month": Decimal("0.023"),
        "egress_price_per_gb": Decimal("0.09"),
        "energy_tariff_per_kwh": Decimal("0.08"),
        "energy_kwh": Decimal(123_456),
        "currency": "USD",
    }
    return whole_bill(**(arguments | changes))


def test_a_gb_is_what_the_clouds_bill() -> None:
    assert BILLED_GB_BYTES == GB == 2**30


def test_checkpoint_storage_matches_the_hand_computed_example() -> None:
    line = _bill().line("checkpoint_storage")
    # 8.03e9 parameters x (2 B bf16 weights + 4 B fp32 master + 8 B Adam m and v = 14 B)
    #   = 112,420,000,000 B = 112,420,000,000 / 1,073,741,824 = 104.69928... GB a checkpoint
    # x 5 kept x 3 months = 1,570.4892... GB-months
    # x 0.023 USD/GB-month = 36.12125... USD -> 36.12 USD
    assert line.quantity == pytest.approx(112_420_000_000 / GB * 5 * 3)
    assert line.quantity == pytest.approx(1570.4892575740814)
    assert line.unit == "GB-month"
    assert line.unit_price == Decimal("0.023")
    assert line.amount == Decimal("36.12")
    assert "14 B (2 B weights + 12 B optimizer state)" in line.formula
    assert "5 kept x 3 months" in line.formula
    assert line.formula.endswith("= 36.12 USD")


def test_data_set_storage_matches_the_hand_computed_example() -> None:
    line = _bill().line("dataset_storage")
    # 2e12 tokens x 4 B = 8e12 B = 8e12 / 1,073,741,824 = 7,450.5806 GB
    # x 3 months = 22,351.7418 GB-months x 0.023 USD/GB-month = 514.0900 USD -> 514.09 USD
    assert line.quantity == pytest.approx(8e12 / GB * 3)
    assert line.amount == Decimal("514.09")
    assert "2e12 tokens x 4 B" in line.formula


def test_egress_of_the_final_weights_matches_the_hand_computed_example() -> None:
    line = _bill().line("egress")
    # 8.03e9 parameters x 2 B (bf16) = 16,060,000,000 B = 14.95704 GB
    # x 0.09 USD/GB = 1.346134 USD -> 1.35 USD
    assert line.quantity == pytest.approx(16_060_000_000 / GB)
    assert line.unit == "GB"
    assert line.amount == Decimal("1.35")


def test_energy_with_a_tariff_is_shown_but_not_added_when_the_price_holds_power() -> None:
    bill = _bill()
    line = bill.line("energy")
    # 123,456 kWh x 0.08 USD/kWh = 9,876.48 USD
    assert line.quantity == 123_456.0
    assert line.amount == Decimal("9876.48")
    assert not line.in_total
    assert "already paid" in line.note
    # 36.12 + 514.09 + 1.35
    assert bill.total == Decimal("551.56")


def test_energy_is_added_when_the_accelerator_price_excludes_power() -> None:
    bill = _bill(energy_in_price=False)
    assert bill.line("energy").in_total
    # 36.12 + 514.09 + 1.35 + 9,876.48
    assert bill.total == Decimal("10428.04")


def test_carbon_is_a_quantity_without_an_amount() -> None:
    line = _bill(carbon_gco2e_per_kwh=400.0).line("carbon")
    # 123,456 kWh x 400 gCO2e/kWh = 49,382,400 g = 49.3824 tCO2e
    assert line.quantity == pytest.approx(49.3824)
    assert line.unit == "tCO2e"
    assert line.amount is None
    assert not line.in_total
    assert _bill().line("carbon").quantity is None


def test_a_missing_price_gives_no_amount_and_says_which() -> None:
    bill = _bill(storage_price_per_gb_month=None, energy_tariff_per_kwh=None, priced_by="GCP")
    for key in ("checkpoint_storage", "dataset_storage"):
        line = bill.line(key)
        assert line.amount is None
        assert line.unit_price is None
        assert line.note == "no price: GCP gives no storage price"
        assert line.quantity is not None
        assert line.quantity > 0
    energy = bill.line("energy")
    assert energy.amount is None
    assert "tariff" in energy.note
    assert bill.unpriced == ["checkpoint_storage", "dataset_storage"]
    assert bill.total == Decimal("1.35")  # the egress alone
    assert bill.total_label == "Total of priced lines; storage has no price from GCP"
    no_egress = _bill(egress_price_per_gb=None, priced_by="Lambda").line("egress")
    assert no_egress.amount is None
    assert no_egress.note == "no price: Lambda gives no egress price"


def test_the_total_says_what_it_leaves_out_for_want_of_a_price() -> None:
    assert _bill().total_label == "Total of priced lines"
    unpriced = _bill(
        storage_price_per_gb_month=None, egress_price_per_gb=None, priced_by="Example Compute"
    )
    assert unpriced.total == Decimal("0.00")
    assert unpriced.total_label == (
        "Total of priced lines; storage and egress have no price from Example Compute"
    )
    assert unpriced.as_json()["total_label"] == unpriced.total_label


def test_stored_months_and_checkpoints_scale_the_storage() -> None:
    line = _bill(checkpoints_kept=2, retention_months=1.5).line("checkpoint_storage")
    # 104.69928 GB x 2 x 1.5 = 314.0979 GB-months x 0.023 = 7.22425 USD -> 7.22 USD
    assert line.quantity == pytest.approx(112_420_000_000 / GB * 2 * 1.5)
    assert line.amount == Decimal("7.22")
    assert _bill(checkpoints_kept=0).line("checkpoint_storage").amount == Decimal("0.00")


def test_storage_is_paid_for_the_run_and_the_retention_after_it() -> None:
    # A 309-day run: 309 d / (730 h / 24 h = 30.4167 d a month) = 10.1589 months of the run,
    # + 3 months kept after = 13.1589 months, not a fixed 3.
    months = 309 / (730 / 24) + 3
    assert months == pytest.approx(13.158904)
    line = _bill(run_days=309.0).line("checkpoint_storage")
    assert line.quantity == pytest.approx(112_420_000_000 / GB * 5 * months)
    # 104.69928 GB x 5 x 13.158904 = 6,888.68 GB-months x 0.023 USD = 158.4397 -> 158.44 USD
    assert line.amount == Decimal("158.44")
    assert "13.16 months (10.16 of the run + 3 kept after)" in line.formula
    dataset = _bill(run_days=309.0).line("dataset_storage")
    assert dataset.quantity == pytest.approx(8e12 / GB * months)
    assert _bill(run_days=309.0).as_json()["assumptions"]["run_days"] == 309.0


def test_the_checkpoint_size_agrees_with_the_memory_and_whole_run_models() -> None:
    size = checkpoint_size(LLAMA3_8B)
    assert size.weight_bytes + size.state_bytes == CHECKPOINT_BYTES_PER_PARAMETER == 14.0
    assert size.bytes == pytest.approx(8.03e9 * 14)
    # The estimator's own output for a full bf16 run with AdamW.
    result = estimator_estimate(SMALL)
    assert checkpoint_size(result).bytes == pytest.approx(result["parameters"] * 14)


def test_the_checkpoint_size_follows_precision_optimizer_and_method() -> None:
    fp32 = LLAMA3_8B | {"mfu_peak": {"precision": "fp32"}}
    assert checkpoint_size(fp32).bytes == pytest.approx(8.03e9 * (4 + 8))  # weights + m, v
    sgd = LLAMA3_8B | {"training_method": LLAMA3_8B["training_method"] | {"optimizer": "sgd"}}
    assert checkpoint_size(sgd).bytes == pytest.approx(8.03e9 * (2 + 4 + 4))  # + master, momentum
    frozen = LLAMA3_8B | {
        "training_method": LLAMA3_8B["training_method"] | {"trainable_parameters": 6e9}
    }
    # every weight saved, optimizer state of the trained ones only: 8.03e9 x 2 + 6e9 x 12
    assert checkpoint_size(frozen).bytes == pytest.approx(8.03e9 * 2 + 6e9 * 12)
    lora = LLAMA3_8B | {
        "training_method": {"type": "lora", "optimizer": "adamw", "trainable_parameters": 4.2e7}
    }
    # the adapters only: 16-bit weights, fp32 m and v, no master copy
    assert checkpoint_size(lora).bytes == pytest.approx(4.2e7 * (2 + 8))
    egress = whole_bill(
        estimate=lora,
        tokens=1e8,
        storage_price_per_gb_month=None,
        egress_price_per_gb=Decimal("0.09"),
        energy_tariff_per_kwh=None,
        energy_kwh=Decimal(10),
        currency="USD",
    ).line("egress")
    assert egress.quantity == pytest.approx(4.2e7 * 2 / GB)


def test_a_run_stored_without_its_method_counts_as_bf16_adamw() -> None:
    assert checkpoint_size({"parameters": 1e9}).bytes == pytest.approx(14e9)


def test_as_json_keeps_money_as_decimal_strings() -> None:
    data = _bill(carbon_gco2e_per_kwh=400.0).as_json()
    assert data["currency"] == "USD"
    assert data["total"] == "551.56"
    assert [line["key"] for line in data["lines"]] == [
        "checkpoint_storage",
        "dataset_storage",
        "egress",
        "energy",
        "carbon",
    ]
    assert data["lines"][0]["amount"] == "36.12"
    assert data["lines"][0]["unit_price"] == "0.023"
    assert data["lines"][4]["amount"] is None
    assert data["checkpoint_bytes"] == pytest.approx(112_420_000_000)
    assert data["assumptions"]["checkpoints_kept"] == 5
    assert data["assumptions"]["months_stored"] == 3.0
    assert data["assumptions"]["retention_months"] == 3.0
    assert data["assumptions"]["dataset_bytes_per_token"] == 4.0
    assert data["unpriced"] == []


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"checkpoints_kept": -1}, "checkpoints_kept"),
        ({"retention_months": -0.5}, "retention_months"),
        ({"run_days": -1.0}, "run_days"),
        ({"dataset_bytes_per_token": 0.0}, "dataset_bytes_per_token"),
        ({"tokens": -1.0}, "tokens"),
    ],
)
def test_whole_bill_refuses_impossible_inputs(change: dict[str, Any], field: str) -> None:
    with pytest.raises(PlannerError) as caught:
        _bill(**change)
    assert caught.value.field == field


# --- The input pipeline ---------------------------------------------------------------------


def test_input_pipeline_sizes_one_node() -> None:
    pipeline = input_pipeline(LLAMA3_8B, gpus_per_node=8)
    # 15,625 tokens/s per GPU x 8 = 125,000 tokens/s per node
    # x 4 B = 500,000 B/s = 4,000,000 bit/s = 0.004 Gbit/s
    assert pipeline["gpus_per_node"] == 8
    assert pipeline["tokens_per_s_per_node"] == pytest.approx(125_000.0)
    assert pipeline["read_bytes_per_s_per_node"] == pytest.approx(500_000.0)
    assert pipeline["read_gbps_per_node"] == pytest.approx(0.004)
    assert pipeline["warnings"] == []


def test_input_pipeline_warns_above_the_stated_figures() -> None:
    fine = input_pipeline(
        LLAMA3_8B, gpus_per_node=8, node_read_gbps=0.005, cpu_tokens_per_s_per_node=125_001
    )
    assert fine["warnings"] == []
    short = input_pipeline(
        LLAMA3_8B, gpus_per_node=8, node_read_gbps=0.003, cpu_tokens_per_s_per_node=124_999
    )
    read, cpu = short["warnings"]
    assert "0.004 Gbit/s" in read
    assert "0.003 Gbit/s" in read
    assert "125,000 tokens/s" in cpu
    assert "124,999 tokens/s" in cpu


def test_input_pipeline_with_bigger_tokens_needs_more_bandwidth() -> None:
    pipeline = input_pipeline(LLAMA3_8B, gpus_per_node=8, bytes_per_token=2.0, node_read_gbps=1)
    assert pipeline["read_gbps_per_node"] == pytest.approx(0.002)
    assert pipeline["warnings"] == []


def test_input_pipeline_of_a_run_smaller_than_a_node() -> None:
    four = LLAMA3_8B | {"tokens_per_s": 62_500.0}  # 4 GPUs at 15,625 tokens/s
    pipeline = input_pipeline(four, gpus_per_node=8)
    assert pipeline["gpus_per_node"] == 4
    assert pipeline["tokens_per_s_per_node"] == pytest.approx(62_500.0)


def test_input_pipeline_refuses_an_empty_node() -> None:
    with pytest.raises(PlannerError):
        input_pipeline(LLAMA3_8B, gpus_per_node=0)
