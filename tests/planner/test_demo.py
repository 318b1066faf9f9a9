"""The demo project: a like-for-like comparison that a new user can trust at first sight."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.test import Client
from django.utils import timezone

from estimator.core.deadline import MISSES_P50, MISSES_P90
from planner.budgets.models import BudgetRequest
from planner.demo import demo_users_load
from planner.demo_project import (
    DEMO_CLUSTER_SIZE,
    DEMO_PROJECT,
    demo_justification,
    planner_demo_load,
)
from planner.scenarios.deadline import run_deadline
from planner.scenarios.models import Project
from planner.scenarios.selectors import comparison_rows
from pricing.demo import EXAMPLE_QUOTE_REFERENCE, pricing_demo_load
from pricing.models import VendorQuote

# The demo starts its runs on commit and reads their figures back: real transactions.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def demo_project(eager_tasks: None) -> Project:
    # The demo is what `make run` loads: the embedded default, which runs tasks in-process.
    # With a broker configured its runs would go to the workers; these tests check the
    # demo's figures, so they run its tasks in-process here too.
    demo_users_load()
    pricing_demo_load()
    planner_demo_load()
    return Project.objects.get(name=DEMO_PROJECT)


def test_demo_scenarios_compare_clusters_of_one_size(demo_project: Project) -> None:
    scenarios = list(demo_project.scenarios.all())
    assert len(scenarios) == 3
    assert {scenario.num_gpus for scenario in scenarios} == {DEMO_CLUSTER_SIZE}


def test_demo_cluster_size_is_what_the_example_quote_covers(demo_project: Project) -> None:
    quote = VendorQuote.objects.get(reference=EXAMPLE_QUOTE_REFERENCE)
    assert quote.accelerator_count == DEMO_CLUSTER_SIZE
    assert f"{DEMO_CLUSTER_SIZE} x H100" in quote.terms


def test_demo_runs_fit_each_accelerator_memory(demo_project: Project) -> None:
    for scenario in demo_project.scenarios.all():
        run = scenario.runs.get()
        assert run.status == "succeeded", (scenario.name, run.error)
        assert run.result is not None
        assert run.result["fits_in_memory"] is True, scenario.name


def test_demo_h100s_are_fastest_and_alone_meet_the_deadline_at_p50(demo_project: Project) -> None:
    # The module's docstring says so; the estimator's figures must keep saying it.
    rows = comparison_rows(demo_project.scenarios.all(), "USD")
    fastest = next(row for row in rows if row.fastest)
    assert fastest.scenario.accelerator_id == "H100-SXM"
    verdicts = {}
    for row in rows:
        assert row.run is not None
        check = run_deadline(row.run, project=demo_project)
        assert check is not None
        verdicts[row.scenario.accelerator_id] = check.verdict
    assert verdicts == {
        "A100-80GB-SXM": MISSES_P50, "H100-SXM": MISSES_P90, "TPU-v5p": MISSES_P50,
    }  # fmt: skip


def test_demo_h100_days_match_the_stated_figures(demo_project: Project) -> None:
    # The figures the issue states for the H100 quote: about 87 / 126 / 180 days against 150
    # left (this seed gives about 130 / 189; "about" is taken as within 8 %).
    run = demo_project.scenarios.get(name__startswith="H100").runs.get()
    days = run.montecarlo["training_days"]  # type: ignore[index]
    assert [days["p10"], days["p50"], days["p90"]] == pytest.approx([87, 126, 180], rel=0.08)
    check = run_deadline(run, project=demo_project)
    assert check is not None
    assert check.days_available == 150
    assert check.probability is not None
    assert 0.5 < check.probability < 0.9


def test_demo_justification_says_how_each_option_meets_the_deadline(
    demo_project: Project,
) -> None:
    text = BudgetRequest.objects.get(project=demo_project).justification
    assert "finish before the deadline" not in text
    assert text.startswith("The only option compared that meets the deadline at P50.")
    assert "it meets at P50, misses at P90" in text
    assert "A100 80GB at GCP list price: misses at P50" in text
    assert "TPU v5p at GCP list price: misses at P50" in text
    assert "Its P90 cost stays within the project's budget ceiling" in text


def test_demo_justification_when_no_option_meets_the_deadline(demo_project: Project) -> None:
    # Move the deadline to 30 days out: every run misses at P50, and the words follow.
    demo_project.deadline = timezone.localdate() + timedelta(days=30)
    runs = [scenario.runs.get() for scenario in demo_project.scenarios.all()]
    checks = {}
    for run in runs:
        check = run_deadline(run, project=demo_project)
        assert check is not None
        checks[run.pk] = check
    text = demo_justification(runs[0], runs, checks, demo_project)
    assert text.startswith("No option compared meets the deadline at P50")
    assert "it misses at P50" in text


def test_demo_budget_request_is_for_the_h100s_within_the_ceiling(demo_project: Project) -> None:
    request = BudgetRequest.objects.get(project=demo_project)
    budget, ceiling = request.run.budget, demo_project.budget_ceiling
    assert request.run.scenario.accelerator_id == "H100-SXM"
    assert budget is not None
    assert ceiling is not None
    assert Decimal(budget["cost"]["p90"]) <= ceiling


def test_demo_dashboard_names_the_h100s_fastest(demo_project: Project) -> None:
    client = Client()
    client.login(username="maya", password="maya-demo-pass")
    page = client.get("/").content.decode()
    assert "H100 under the example quote" in page
    fastest = page.split("Fastest (P50)")[1].split("Budget ceiling")[0]
    assert "H100 under the example quote" in fastest
    assert "A100" not in fastest


@pytest.mark.redis
@pytest.mark.postgres
def test_on_real_workers_the_demo_request_is_submitted_once_the_runs_finish(
    celery_worker_factory: type,
) -> None:
    """Without a worker the runs wait and the request is not submitted yet; run again once
    a worker has finished them, load_demo submits it instead of saying only "present"."""
    demo_users_load()
    pricing_demo_load()
    first = planner_demo_load(wait_s=0)
    assert any("not yet" in line for line in first), first
    assert not BudgetRequest.objects.exists()
    worker = celery_worker_factory()
    try:
        second = planner_demo_load(wait_s=120)
    finally:
        worker.stop()
    assert second[0] == f"Demo project '{DEMO_PROJECT}': present."
    assert any("submitted, awaiting finn's approval" in line for line in second), second
    request = BudgetRequest.objects.get()
    assert request.state == "submitted"
    assert planner_demo_load(wait_s=0) == [f"Demo project '{DEMO_PROJECT}': present."]
