"""Saved capacity plans: the service, its chunks and merge, cancelling, re-running, turning
an option into a scenario, and the pages.

The chunks here are executed by calling the task's body in this process (the on-commit send
is captured, not run); ``test_capacity_worker.py`` sends them through Redis to real workers.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from lib.broker import waiting_message
from organisations.demo import demo_organisation
from organisations.models import Organisation
from planner.capacity.models import CapacityPlan, ChunkStatus, PlanStatus
from planner.capacity.search import capacity_options, capacity_plan
from planner.capacity.services import (
    CapacityQuestion,
    PlanNotCancellable,
    capacity_chunk_execute,
    capacity_option_scenario_create,
    capacity_plan_cancel,
    capacity_plan_create,
    capacity_plan_merge,
    capacity_plan_rerun,
    capacity_plans_dispatch_pending,
)
from planner.common.errors import PlannerError
from planner.scenarios.models import Project, RunStatus, Scenario
from planner.scenarios.services import run_execute, run_start
from pricing.demo import EXAMPLE_BOOK_NAME
from pricing.models import PriceBook
from tests.planner.capacity.plans import assert_same_plan
from tests.planner.conftest import example_quote

pytestmark = pytest.mark.django_db


def _question(**changes: Any) -> CapacityQuestion:
    values: dict[str, Any] = {
        "deadline": timezone.localdate() + timedelta(days=30),
        "currency": "USD",
        "max_gpus": 256,
        "model_preset": "llama3-8b",
        "tokens": 1e12,
        "budget": None,
        "book": PriceBook.objects.get(name=EXAMPLE_BOOK_NAME),
        "include_quotes": True,
        "include_onprem": False,
        **changes,
    }
    return CapacityQuestion(**values)


@pytest.fixture
def capture(django_capture_on_commit_callbacks: Any) -> Iterator[Any]:
    return django_capture_on_commit_callbacks


def _create(user: User, capture: Any, **changes: Any) -> CapacityPlan:
    with capture(execute=False):  # the chunks' tasks are not sent: this test runs them
        return capacity_plan_create(user=user, question=_question(**changes))


def _result(plan: CapacityPlan) -> dict[str, Any]:
    assert plan.result is not None
    return plan.result


def _work(plan: CapacityPlan) -> CapacityPlan:
    for chunk in plan.chunks.order_by("-index"):
        capacity_chunk_execute(chunk_id=chunk.pk, task_id=chunk.task_id)
    capacity_plan_merge(plan_id=plan.pk)
    plan.refresh_from_db()
    return plan


def test_a_saved_plan_is_split_and_merges_to_the_whole_search(
    prices: None, requester: User, capture: Any
) -> None:
    plan = _create(requester, capture)
    assert plan.status == PlanStatus.QUEUED
    assert plan.result is None
    assert plan.chunks_total == plan.chunks.count() > 1
    assert set(plan.chunks.values_list("status", flat=True)) == {ChunkStatus.QUEUED}
    done = _work(plan)
    assert done.status == PlanStatus.SUCCEEDED
    assert done.progress == 1.0
    assert done.estimator_version
    built = capacity_options(
        book=PriceBook.objects.get(name=EXAMPLE_BOOK_NAME),
        include_quotes=True,
        include_onprem=False,
        currency="USD",
        max_gpus=256,
        on=timezone.localdate(),
        viewer=demo_organisation(),
    )
    whole = capacity_plan(
        plan.scenario, built.options, deadline_days=30, budget=None, exhaustive=True
    )
    assert_same_plan(done.result, whole)
    assert [o["key"] for o in done.options] == [o.key for o in built.options]


def test_a_chunk_is_searched_once_and_only_by_its_own_task(
    prices: None, requester: User, capture: Any
) -> None:
    plan = _create(requester, capture)
    chunk = plan.chunks.first()
    assert chunk is not None
    assert capacity_chunk_execute(chunk_id=chunk.pk, task_id="someone-else").startswith("skipped")
    assert capacity_chunk_execute(chunk_id=chunk.pk, task_id=chunk.task_id) == "done"
    chunk.refresh_from_db()
    first = chunk.result
    assert capacity_chunk_execute(chunk_id=chunk.pk, task_id=chunk.task_id).startswith("skipped")
    chunk.refresh_from_db()
    assert (chunk.status, chunk.attempts, chunk.result) == (ChunkStatus.DONE, 1, first)
    plan.refresh_from_db()
    assert plan.progress == pytest.approx(1 / plan.chunks_total)
    assert capacity_plan_merge(plan_id=plan.pk) == "waiting for chunks"


def test_cancel_stops_the_chunks_not_yet_searched(
    prices: None, requester: User, capture: Any
) -> None:
    plan = _create(requester, capture)
    first = plan.chunks.order_by("index").first()
    assert first is not None
    capacity_chunk_execute(chunk_id=first.pk, task_id=first.task_id)
    cancelled = capacity_plan_cancel(user=requester, plan=plan)
    assert cancelled.status == PlanStatus.CANCELLED
    assert cancelled.cancelled_by == requester
    for chunk in plan.chunks.exclude(pk=first.pk):  # tasks that arrive now do nothing
        assert capacity_chunk_execute(chunk_id=chunk.pk, task_id=chunk.task_id).startswith(
            "skipped"
        )
    statuses = dict(plan.chunks.values_list("index", "status"))
    assert statuses.pop(first.index) == ChunkStatus.DONE
    assert set(statuses.values()) == {ChunkStatus.CANCELLED}
    assert not plan.chunks.exclude(pk=first.pk).filter(result__isnull=False).exists()
    assert capacity_plan_merge(plan_id=plan.pk).startswith("skipped")
    assert capacity_plan_cancel(user=requester, plan=plan).status == PlanStatus.CANCELLED


def test_a_finished_plan_cannot_be_cancelled(prices: None, requester: User, capture: Any) -> None:
    plan = _work(_create(requester, capture, max_gpus=16))
    with pytest.raises(PlanNotCancellable):
        capacity_plan_cancel(user=requester, plan=plan)


def test_a_viewer_cannot_plan_or_cancel(
    prices: None, requester: User, viewer: User, capture: Any
) -> None:
    with pytest.raises(PlannerError, match="plan capacity"):
        capacity_plan_create(user=viewer, question=_question())
    plan = _create(requester, capture)
    with pytest.raises(PlannerError, match="cancel"):
        capacity_plan_cancel(user=viewer, plan=plan)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"deadline": timezone.localdate()}, "deadline"),
        ({"model_preset": ""}, "model_preset"),
        ({"book": None, "include_quotes": False}, "book"),
        ({"currency": "XYZ"}, "currency"),
        ({"max_gpus": 100_001}, "max_gpus"),
        ({"max_gpus": 0}, "max_gpus"),
        ({"budget": Decimal(-1)}, "budget"),
        ({"tokens": 0.0}, "tokens"),
    ],
)
def test_bad_questions_name_the_field_and_write_nothing(
    prices: None, requester: User, changes: dict[str, Any], field: str
) -> None:
    with pytest.raises(PlannerError) as refused:
        capacity_plan_create(user=requester, question=_question(**changes))
    assert refused.value.field == field
    assert not CapacityPlan.objects.exists()


def test_another_organisations_scenario_book_and_project_are_refused(
    prices: None, requester: User, outsider: User, scenario: Scenario, project: Project,
    other_organisation: Organisation,
) -> None:  # fmt: skip
    with pytest.raises(PlannerError) as refused:
        capacity_plan_create(user=outsider, question=_question(model_preset="", scenario=scenario))
    assert refused.value.field == "scenario"
    private = PriceBook.objects.get(name=EXAMPLE_BOOK_NAME)
    private.organisation = other_organisation
    private.save()
    with pytest.raises(PlannerError) as refused:
        capacity_plan_create(user=requester, question=_question(book=private))
    assert refused.value.field == "book"
    with pytest.raises(PlannerError):  # the outsider may not plan in the project's org
        capacity_plan_create(user=outsider, question=_question(), project=project)
    assert not CapacityPlan.objects.exists()


def test_a_plan_from_a_scenario_searches_its_model(
    requester: User, scenario: Scenario, capture: Any
) -> None:
    plan = _create(requester, capture, model_preset="", scenario=scenario, tokens=None)
    assert plan.scenario["model"] == scenario.spec["model"]
    assert plan.scenario["training"] == scenario.spec["training"]
    assert plan.scenario["parallelism"] == "auto"
    assert "cluster" not in plan.scenario
    assert plan.inputs["scenario"] == scenario.pk


def test_a_re_run_asks_the_same_question_of_todays_prices(
    prices: None, requester: User, capture: Any
) -> None:
    plan = _work(_create(requester, capture, book=None, max_gpus=64))
    quote = example_quote()
    quote.price_per_accelerator_hour = Decimal("1.50")
    quote.save()
    with capture(execute=False):
        again = capacity_plan_rerun(user=requester, plan=plan)
    assert again.rerun_of == plan
    assert again.status == PlanStatus.QUEUED
    assert again.scenario == plan.scenario
    assert again.deadline == plan.deadline
    assert [o["original_price"] for o in plan.options] == ["2.1000000000"]
    assert [Decimal(o["original_price"]) for o in again.options] == [Decimal("1.50")]


def test_an_option_becomes_a_scenario_whose_run_costs_what_the_plan_said(
    prices: None, requester: User, project: Project, capture: Any
) -> None:
    """The demo quote commits 256 H100s for 12 months: the plan's cheapest use of it and a
    run of the scenario made from that option both cost the committed 4,709,376 USD; an
    on-demand option costs its GPU-hours, to the cent, in both."""
    plan = _work(
        _create(
            requester, capture, max_gpus=256, deadline=timezone.localdate() + timedelta(days=900)
        )
    )
    quote_key = f"vendor_quote:{example_quote().pk}"
    by_option = {p["option_key"]: p for p in reversed(_result(plan)["feasible"])}  # cheapest wins
    on_demand = next(
        p for p in _result(plan)["feasible"] if p["option_key"].startswith("price_entry:")
    )
    for point in (by_option[quote_key], on_demand):
        made = capacity_option_scenario_create(
            user=requester, plan=plan, option_index=point["option"],
            num_gpus=point["num_gpus"], project=project,
        )  # fmt: skip
        assert made.spec["cluster"] == {
            "accelerator": point["accelerator"],
            "num_gpus": point["num_gpus"],
        }
        assert made.spec["parallelism"] == point["parallelism"]
        assert f"{made.price_source}:{made.price.pk}" == point["option_key"]  # type: ignore[union-attr]
        with capture(execute=False):
            run = run_start(user=requester, scenario=made, seed=1, samples=200)
        finished = run_execute(run_id=run.pk)
        assert finished is not None
        assert finished.status == RunStatus.SUCCEEDED
        assert finished.budget is not None
        assert Decimal(finished.budget["cost"]["deterministic"]) == Decimal(point["cost"])
    assert Decimal(by_option[quote_key]["cost"]) == Decimal("4709376.00")


def test_an_option_the_plan_did_not_find_is_refused(
    prices: None, requester: User, project: Project, capture: Any
) -> None:
    plan = _create(requester, capture)
    with pytest.raises(PlannerError, match="no result"):
        capacity_option_scenario_create(
            user=requester, plan=plan, option_index=0, num_gpus=8, project=project
        )
    plan = _work(plan)
    with pytest.raises(PlannerError) as refused:
        capacity_option_scenario_create(
            user=requester, plan=plan, option_index=0, num_gpus=7, project=project
        )
    assert refused.value.field == "option"


def test_the_dispatcher_queues_again_a_chunk_whose_worker_went_quiet(
    prices: None, requester: User, capture: Any, settings: Any
) -> None:
    plan = _create(requester, capture, max_gpus=16)
    chunk = plan.chunks.first()
    assert chunk is not None
    stale = timezone.now() - timedelta(seconds=settings.RUN_STALE_AFTER_S + 5)
    plan.chunks.filter(pk=chunk.pk).update(
        status=ChunkStatus.RUNNING, started_at=stale, heartbeat_at=stale, attempts=1,
        dispatched_at=stale,
    )  # fmt: skip
    with capture(execute=False):
        done = capacity_plans_dispatch_pending()
    assert done["chunks_requeued"] == [chunk.pk]
    chunk_after = plan.chunks.get(pk=chunk.pk)
    assert chunk_after.status == ChunkStatus.QUEUED
    assert chunk_after.task_id != chunk.task_id
    # The old task, redelivered late, is superseded; the new one runs it.
    assert capacity_chunk_execute(chunk_id=chunk.pk, task_id=chunk.task_id).startswith("skipped")
    assert capacity_chunk_execute(chunk_id=chunk.pk, task_id=chunk_after.task_id) == "done"


# --- Pages ----------------------------------------------------------------------------------


@pytest.fixture
def client_of(requester: User) -> Client:
    client = Client()
    client.force_login(requester)
    return client


def _form(**values: Any) -> dict[str, str]:
    data = {
        "model_preset": "llama3-8b",
        "tokens": "1T",
        "deadline": (timezone.localdate() + timedelta(days=30)).isoformat(),
        "currency": "USD",
        "max_gpus": "256",
        "book": str(PriceBook.objects.get(name=EXAMPLE_BOOK_NAME).pk),
        "include_quotes": "on",
        **values,
    }
    return {key: value for key, value in data.items() if value != ""}


def test_the_page_saves_the_plan_and_searches_nothing_in_the_request(
    client_of: Client, prices: None, capture: Any
) -> None:
    with capture(execute=False) as sent:
        response = client_of.post(reverse("planner:capacity"), _form())
    plan = CapacityPlan.objects.get()
    assert response.status_code == 302
    assert response["Location"] == plan.get_absolute_url()
    assert plan.status == PlanStatus.QUEUED
    assert plan.result is None
    assert not plan.chunks.exclude(status=ChunkStatus.QUEUED).exists()  # nothing searched
    assert len(sent) == 1  # one callback sends every chunk's task after the commit
    page = client_of.get(plan.get_absolute_url())
    body = page.content.decode()
    assert 'data-testid="live-progress"' in body
    assert waiting_message() in body  # a worker's, or in-process in the embedded default
    status = client_of.get(reverse("planner:capacity-plan-status", args=[plan.pk])).json()
    assert (status["status"], status["state"], status["finished"]) == ("queued", "waiting", False)


def test_a_plan_whose_worker_went_quiet_says_the_worker_was_lost(
    client_of: Client, prices: None, requester: User, capture: Any, settings: Any
) -> None:
    plan = _create(requester, capture, max_gpus=16)
    chunk = plan.chunks.first()
    assert chunk is not None
    status_url = reverse("planner:capacity-plan-status", args=[plan.pk])
    assert client_of.get(status_url).json()["state"] == "waiting"
    silent_s = settings.RUN_STALE_AFTER_S + 25
    stale = timezone.now() - timedelta(seconds=silent_s)
    plan.chunks.filter(pk=chunk.pk).update(
        status=ChunkStatus.RUNNING, started_at=stale, heartbeat_at=stale, attempts=1
    )
    status = client_of.get(status_url).json()
    assert status["state"] == "worker_lost"
    seconds = int(status["state_message"].split("no heartbeat for ")[1].split(" s")[0])
    assert silent_s <= seconds <= silent_s + 5
    with capture(execute=False):
        capacity_plans_dispatch_pending()  # queues the chunk again
    status = client_of.get(status_url).json()
    assert status["state"] == "worker_lost"
    expected = f"attempt 2 of {settings.RUN_MAX_ATTEMPTS}; waiting for a worker."
    assert expected in status["state_message"]


def test_the_plan_page_shows_the_options_chart_and_scenario_buttons(
    client_of: Client, prices: None, requester: User, project: Project, capture: Any
) -> None:
    plan = _work(_create(requester, capture))
    response = client_of.get(plan.get_absolute_url())
    body = response.content.decode()
    for testid in (
        "verdict",
        "capacity-chart",
        "feasible-table",
        "frontier-table",
        "make-scenario",
    ):
        assert f'data-testid="{testid}"' in body
    assert 'data-testid="live-progress"' not in body
    rows = response.context["feasible_rows"]
    assert rows
    assert all(row["meets"] for row in rows)
    assert [row["cost"] for row in rows] == sorted(row["cost"] for row in rows)
    # Each option's deadline verdict from its Monte Carlo days, under its days.
    shown = body.partition('data-testid="feasible-table"')[2].partition("</table>")[0]
    verdicts = re.findall(
        r'data-testid="option-deadline">\s*<span class="deadline" [^>]*data-verdict="(\w+)"', shown
    )
    assert verdicts == [row["deadline"]["verdict"] for row in rows]
    listing = client_of.get(reverse("planner:capacity")).content.decode()
    assert plan.name in listing
    assert 'data-testid="plan-row"' in listing


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"deadline": "2000-01-01"}, "deadline"),
        ({"deadline": "22/04/2027"}, "deadline"),
        ({"model_preset": ""}, "model_preset"),
        ({"book": "", "include_quotes": ""}, "book"),
        ({"currency": "XYZ"}, "currency"),
        ({"max_gpus": "100001"}, "max_gpus"),
        ({"tokens": "many"}, "tokens"),
    ],
)
def test_bad_capacity_input_shows_the_field_error(
    client_of: Client, prices: None, values: dict[str, str], field: str
) -> None:
    response = client_of.post(reverse("planner:capacity"), _form(**values))
    assert response.status_code == 200
    assert field in response.context["form"].errors
    assert not CapacityPlan.objects.exists()


def test_the_empty_form_starts_from_sensible_defaults(client_of: Client, prices: None) -> None:
    response = client_of.get(reverse("planner:capacity"))
    form = response.context["form"]
    assert form["model_preset"].value() == "llama3-8b"
    assert form["book"].value() == PriceBook.objects.get(name=EXAMPLE_BOOK_NAME).pk
    body = response.content.decode()
    default = (timezone.localdate() + timedelta(days=60)).isoformat()
    assert f'type="date" name="deadline" value="{default}"' in body
    assert 'data-testid="no-plans"' in body


def test_cancel_re_run_and_make_scenario_from_the_page(
    client_of: Client, prices: None, requester: User, project: Project, capture: Any
) -> None:
    plan = _create(requester, capture)
    response = client_of.post(reverse("planner:capacity-plan-cancel", args=[plan.pk]))
    assert response.status_code == 302
    plan.refresh_from_db()
    assert plan.status == PlanStatus.CANCELLED
    with capture(execute=False):
        response = client_of.post(reverse("planner:capacity-plan-rerun", args=[plan.pk]))
    again = CapacityPlan.objects.exclude(pk=plan.pk).get()
    assert response["Location"] == again.get_absolute_url()
    assert again.rerun_of == plan
    again = _work(again)
    best = _result(again)["feasible"][0]
    response = client_of.post(
        reverse("planner:capacity-plan-scenario", args=[again.pk]),
        {"project": project.pk, "option": best["option"], "num_gpus": best["num_gpus"]},
    )
    made = Scenario.objects.get(project=project, description__contains=f"plan {again.pk}")
    assert response["Location"] == made.get_absolute_url()
    assert made.num_gpus == best["num_gpus"]


def test_another_organisation_gets_404_on_every_plan_page(
    prices: None, requester: User, outsider: User, capture: Any
) -> None:
    plan = _create(requester, capture)
    client = Client()
    client.force_login(outsider)
    for name, method in (
        ("capacity-plan-detail", "get"),
        ("capacity-plan-status", "get"),
        ("capacity-plan-cancel", "post"),
        ("capacity-plan-rerun", "post"),
        ("capacity-plan-scenario", "post"),
    ):
        response = getattr(client, method)(reverse(f"planner:{name}", args=[plan.pk]))
        assert response.status_code == 404, name
    assert plan.name not in client.get(reverse("planner:capacity")).content.decode()
    plan.refresh_from_db()
    assert plan.status == PlanStatus.QUEUED
