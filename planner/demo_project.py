"""Demo organisation, project and estimated scenarios, so the first page shows real numbers.

The project trains Llama 3 70B on 2 T tokens and compares three ways to pay for it, like for
like on clusters of the same size: 256 A100s at GCP list price, 256 H100s under the example
vendor quote (which covers up to 256), and 256 TPU v5p chips at GCP list price. Each fits the
model in its memory; only the H100s meet the project's deadline at P50, and not at P90 (the
TPU v5p chips cost less but finish late), so the demo's budget request is for the H100s and
its justification says how each option stands against the deadline, as the runs computed it.
Idempotent: a second load adds nothing.
"""

from __future__ import annotations

import time
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from estimator.core.deadline import MISSES_P50, DeadlineCheck
from estimator.core.presets import preset_scenario
from organisations.demo import demo_organisation
from organisations.models import Organisation, Role
from organisations.services import membership_grant
from planner.budgets.models import BudgetRequest
from planner.budgets.services import budget_request_create, budget_request_submit
from planner.demo import DEMO_USERS
from planner.scenarios.deadline import run_deadline
from planner.scenarios.models import EstimationRun, Project, RunStatus
from planner.scenarios.services import project_create, run_start, scenario_create
from pricing.demo import EXAMPLE_BOOK_NAME, EXAMPLE_QUOTE_COUNT, EXAMPLE_QUOTE_REFERENCE
from pricing.models import PriceEntry, VendorQuote

DEMO_PROJECT = "Llama 3 70B pre-training, 2T tokens"
DEMO_SEED = 20261123
#: How long ``load_demo`` waits for real workers to finish the demo runs before submitting
#: the demo budget request on them. [s]
DEMO_WAIT_S = 180.0
TOKENS = 2e12
#: One cluster size for every scenario, so the comparison is of the accelerators, not of how
#: many there are: the example quote's count, which is also the most it covers.
DEMO_CLUSTER_SIZE = EXAMPLE_QUOTE_COUNT
#: (scenario name, accelerator, price-book entry (provider, region) or None for the quote)
DEMO_SCENARIOS = (
    ("A100 80GB at GCP list price", "A100-80GB-SXM", ("gcp", "us-central1")),
    ("H100 under the example quote", "H100-SXM", None),
    ("TPU v5p at GCP list price", "TPU-v5p", ("gcp", "us-central1")),
)


def _organisation() -> Organisation:
    organisation = demo_organisation()
    for demo in DEMO_USERS:
        user = User.objects.get(username=demo.username)
        for role in demo.roles:
            membership_grant(organisation=organisation, user=user, role=role)
        membership_grant(organisation=organisation, user=user, role=Role.VIEWER)
    return organisation


def _price(accelerator: str, where: tuple[str, str] | None) -> PriceEntry | VendorQuote:
    if where is None:
        return VendorQuote.objects.get(reference=EXAMPLE_QUOTE_REFERENCE)
    provider, region = where
    return PriceEntry.objects.get(
        book__name=EXAMPLE_BOOK_NAME,
        provider__slug=provider,
        region=region,
        accelerator__catalog_id=accelerator,
        pricing_type="on_demand",
    )


def planner_demo_load(*, wait_s: float = DEMO_WAIT_S) -> list[str]:
    """Create the demo project and start one run per scenario (eager in the embedded mode),
    then submit the demo budget request on their results.

    With real workers the runs finish on them: this waits up to ``wait_s`` seconds for them.
    Run again when they finished later, it submits the request that is still missing.
    """
    with transaction.atomic():
        organisation = _organisation()
        maya = User.objects.get(username="maya")
        present = Project.objects.filter(organisation=organisation, name=DEMO_PROJECT).first()
    if present is not None:
        lines = [f"Demo project '{DEMO_PROJECT}': present."]
        if BudgetRequest.objects.filter(project=present).exists():
            return lines
        runs = [
            run
            for scenario in present.scenarios.all()
            if (run := scenario.runs.order_by("-pk").first()) is not None
        ]
        return lines + _budget_request(maya, _finished(runs, wait_s), present)
    with transaction.atomic():
        project = project_create(
            user=maya,
            organisation=organisation,
            name=DEMO_PROJECT,
            goal="Pre-train a Llama 3 70B-class model on 2 T tokens for the Q3 product launch.",
            deadline=timezone.localdate() + timedelta(days=150),
            budget_ceiling=Decimal("9000000"),
            currency="USD",
        )
        scenarios = []
        for name, accelerator, where in DEMO_SCENARIOS:
            price = _price(accelerator, where)
            scenarios.append(
                scenario_create(
                    user=maya,
                    project=project,
                    name=name,
                    model_preset="llama3-70b",
                    spec=preset_scenario(
                        "llama3-70b",
                        accelerator=accelerator,
                        num_gpus=DEMO_CLUSTER_SIZE,
                        tokens=TOKENS,
                    ),
                    price_source="vendor_quote" if where is None else "price_entry",
                    price=price,
                )
            )
    runs = []
    for scenario in scenarios:
        with transaction.atomic():
            runs.append(run_start(user=maya, scenario=scenario, seed=DEMO_SEED))
    lines = [
        f"Demo project '{DEMO_PROJECT}': created with {len(scenarios)} scenarios, "
        "each estimated (or queued for a worker when Redis is configured)."
    ]
    return lines + _budget_request(maya, _finished(runs, wait_s), project)


def _finished(runs: list[EstimationRun], wait_s: float) -> list[EstimationRun]:
    """The runs as they are once all finished, or after ``wait_s`` seconds (real workers
    run them; in eager mode they are finished already)."""
    deadline = time.monotonic() + wait_s
    while True:
        current = [EstimationRun.objects.get(pk=run.pk) for run in runs]
        if all(run.is_finished for run in current) or time.monotonic() >= deadline:
            return current
        time.sleep(0.5)


def _budget_request(maya: User, runs: list[EstimationRun], project: Project) -> list[str]:
    """Submit a budget request on the cheapest run that meets the project's deadline at P50
    (the cheapest of all when none does), so finn finds one awaiting approval."""
    finished = [run for run in runs if run.status == RunStatus.SUCCEEDED and run.budget]
    if len(finished) < len(runs):
        return [
            "Demo budget request: not yet (the runs are still with the Celery workers); run "
            "`manage.py load_demo` again once they have finished to submit it."
        ]
    checks = {run.pk: _deadline(run, project) for run in finished}
    on_time = [run for run in finished if checks[run.pk].verdict != MISSES_P50] or finished
    chosen = min(on_time, key=lambda run: Decimal(_budget(run)["cost"]["p50"]))
    late = checks[chosen.pk].verdict == MISSES_P50
    with transaction.atomic():
        request = budget_request_create(
            user=maya,
            run=chosen,
            title=f"{DEMO_PROJECT}: {chosen.scenario.name}",
            justification=demo_justification(chosen, finished, checks, project),
            alternatives=[run for run in finished if run != chosen],
            # Only when no option meets the deadline at P50: the request says so and why.
            override_reason="No option compared meets the deadline at P50; this is the "
            "cheapest, and the launch date has to move."
            if late
            else "",
        )
        budget_request_submit(user=maya, request=request, comment="For Q3 sign-off.")
    return [f"Demo budget request '{request.title}': submitted, awaiting finn's approval."]


def _budget(run: EstimationRun) -> dict[str, Any]:
    assert run.budget is not None
    return run.budget


def _deadline(run: EstimationRun, project: Project) -> DeadlineCheck:
    check = run_deadline(run, project=project)
    assert check is not None  # a succeeded run has its Monte Carlo
    return check


def demo_justification(
    chosen: EstimationRun,
    runs: list[EstimationRun],
    checks: dict[int, DeadlineCheck],
    project: Project,
) -> str:
    """The demo request's case in words, each claim read from the runs' computed figures: how
    the chosen run and the others stand against the deadline, and against the ceiling."""
    mine = checks[chosen.pk]
    chance = ""
    if mine.probability_text:
        chance = f", a {mine.probability_text} chance of finishing in time"
    on_time = sum(check.verdict != MISSES_P50 for check in checks.values())
    if mine.verdict == MISSES_P50:
        first = "No option compared meets the deadline at P50; this one is the cheapest."
    elif on_time == 1:
        first = "The only option compared that meets the deadline at P50."
    else:
        first = "Cheapest at P50 of the options compared that meet the deadline at P50."
    lines = [
        first,
        f"Against the {project.deadline:%Y-%m-%d} deadline it {mine.text} ({mine.p50_days:,.0f} "
        f"days at P50, {mine.p90_days:,.0f} at P90{chance}).",
    ]
    for run in runs:
        if run != chosen:
            check = checks[run.pk]
            lines.append(f"{run.scenario.name}: {check.text} ({check.p50_days:,.0f} days at P50).")
    ceiling, p90 = project.budget_ceiling, Decimal(_budget(chosen)["cost"]["p90"])
    if ceiling is not None and _budget(chosen)["currency"] == project.currency:
        within = "stays within" if p90 <= ceiling else "is above"
        lines.append(f"Its P90 cost {within} the project's budget ceiling.")
    lines.append("Contingency is P90 - P50 of the Monte Carlo.")
    return " ".join(lines)
