"""Demo organisation, project and estimated scenarios, so the first page shows real numbers.

The project trains Llama 3 70B on 2 T tokens and compares three ways to pay for it, like for
like on clusters of the same size: 256 A100s at GCP list price, 256 H100s under the example
vendor quote (which covers up to 256), and 256 TPU v5p chips at GCP list price. Each fits the
model in its memory; only the H100s finish before the project's deadline (the TPU v5p chips
cost less but finish late), so the demo's budget request is for the H100s.
Idempotent: a second load adds nothing.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from estimator.core.presets import preset_scenario
from organisations.demo import demo_organisation
from organisations.models import Organisation, Role
from organisations.services import membership_grant
from planner.budgets.services import budget_request_create, budget_request_submit
from planner.demo import DEMO_USERS
from planner.scenarios.models import EstimationRun, Project, RunStatus
from planner.scenarios.services import project_create, run_start, scenario_create
from pricing.demo import EXAMPLE_BOOK_NAME, EXAMPLE_QUOTE_COUNT, EXAMPLE_QUOTE_REFERENCE
from pricing.models import PriceEntry, VendorQuote

DEMO_PROJECT = "Llama 3 70B pre-training, 2T tokens"
DEMO_SEED = 20261123
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


def planner_demo_load() -> list[str]:
    """Create the demo project and start one run per scenario (eager in the embedded mode)."""
    with transaction.atomic():
        organisation = _organisation()
        if Project.objects.filter(organisation=organisation, name=DEMO_PROJECT).exists():
            return [f"Demo project '{DEMO_PROJECT}': present."]
        maya = User.objects.get(username="maya")
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
    refreshed = [EstimationRun.objects.get(pk=r.pk) for r in runs]
    return lines + _budget_request(maya, refreshed, project)


def _budget_request(maya: User, runs: list[EstimationRun], project: Project) -> list[str]:
    """Submit a budget request on the cheapest run that finishes by the project's deadline
    (at P50; the cheapest of all when none does), so finn finds one awaiting approval."""
    finished = [run for run in runs if run.status == RunStatus.SUCCEEDED and run.budget]
    if len(finished) < len(runs):
        return ["Demo budget request: skipped (the runs are still with the Celery workers)."]
    assert project.deadline is not None
    days_left = (project.deadline - timezone.localdate()).days

    def p50(run: EstimationRun, figure: str) -> float:
        return float(run.budget[figure]["p50"])  # type: ignore[index]

    on_time = [run for run in finished if p50(run, "training_days") <= days_left] or finished
    chosen = min(on_time, key=lambda run: Decimal(run.budget["cost"]["p50"]))  # type: ignore[index]
    with transaction.atomic():
        request = budget_request_create(
            user=maya,
            run=chosen,
            title=f"{DEMO_PROJECT}: {chosen.scenario.name}",
            justification=(
                "Cheapest at P50 of the options compared that finish before the deadline; its "
                "P90 stays within the project's budget ceiling. Contingency is P90 - P50 of "
                "the Monte Carlo."
            ),
            alternatives=[run for run in finished if run != chosen],
        )
        budget_request_submit(user=maya, request=request, comment="For Q3 sign-off.")
    return [f"Demo budget request '{request.title}': submitted, awaiting finn's approval."]
