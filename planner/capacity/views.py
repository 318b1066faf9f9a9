"""Capacity plans: ask "N tokens by date D within budget B, on what?", watch the workers
search it, read the options, turn one into a scenario. The pages only read and write rows;
the search runs on the Celery workers (:mod:`planner.capacity.services`)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.forms import ModelChoiceField
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from lib.broker import waiting_message
from planner.capacity import services as plans
from planner.capacity.forms import CapacityForm
from planner.capacity.models import CapacityPlan, PlanStatus
from planner.capacity.search import PricedOption, meets
from planner.capacity.selectors import capacity_plans_for, plan_worker_lost
from planner.common.errors import NotAllowed, PlannerError
from planner.common.views import can_author, forbidden
from planner.scenarios.selectors import organisations_for, projects_for, scenarios_for
from planner.scenarios.views.figures import layout_text
from planner.scenarios.views.reads import tokens_text
from pricing.access import visible
from pricing.models import PriceBook

#: Rows of the feasible table; the chart shows every point.
FEASIBLE_SHOWN = 25
#: The chart leaves out clusters slower than this many times the deadline (tables keep them).
CHART_DAYS = 3
PLANS_PER_PAGE = 25


def _books(request: HttpRequest) -> QuerySet[PriceBook]:
    """Published books the user sees: public ones and their organisations' own."""
    published = PriceBook.objects.filter(status=PriceBook.Status.PUBLISHED)
    return visible(published, request.user, field="organisation", public=True)


def _initial(request: HttpRequest) -> dict[str, Any]:
    organisation = organisations_for(request.user).first()
    book = _books(request).order_by("-fetched_at")
    return {
        "model_preset": "llama3-8b",
        "deadline": timezone.localdate() + timedelta(days=60),
        "currency": organisation.base_currency if organisation else "USD",
        "book": book.first(),
        "max_gpus": 1024,
        "include_quotes": True,
        "include_onprem": True,
    }


def _form(request: HttpRequest, data: Any = None) -> CapacityForm:
    scenarios = scenarios_for(request.user).order_by("project__name", "name")
    projects = projects_for(request.user).order_by("name")
    form = CapacityForm(data, initial=_initial(request), scenarios=scenarios, projects=projects)
    book_field = form.fields["book"]
    assert isinstance(book_field, ModelChoiceField)
    book_field.queryset = _books(request)  # another organisation's book is no choice
    return form


@login_required
@require_http_methods(["GET", "POST"])
def capacity_plan_list(request: HttpRequest) -> HttpResponse:
    """The question's form and the organisation's saved plans. A POST saves a queued plan
    (rows only: the workers search it) and shows it."""
    form = _form(request, request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            plan = plans.capacity_plan_create(
                user=request.user, question=form.question(), project=form.cleaned_data["project"]
            )
        except NotAllowed as error:
            return forbidden(request, error)
        except PlannerError as error:
            form.add_error(error.field if error.field in form.fields else None, error.message)
        else:
            return redirect(plan)
    page = Paginator(capacity_plans_for(request.user), PLANS_PER_PAGE).get_page(
        request.GET.get("page")
    )
    return render(
        request,
        "planner/capacity.html",
        {"form": form, "page": page, "max_gpus_limit": plans.MAX_PLAN_GPUS},
    )


def _option_rows(plan: CapacityPlan) -> list[PricedOption]:
    return [PricedOption.from_json(option) for option in plan.options]


def _display(
    point: dict[str, Any], options: list[PricedOption], plan: CapacityPlan
) -> dict[str, Any]:
    budget = plan.budget
    return {
        **point,
        "cost": Decimal(point["cost"]),
        "option_record": options[point["option"]],
        "layout": layout_text(point["parallelism"]),
        "late": point["training_days"] > plan.deadline_days,
        "meets": meets(point, deadline_days=plan.deadline_days, budget=budget),
    }


def _chart_data(plan: CapacityPlan, options: list[PricedOption]) -> dict[str, Any]:
    result = plan.result or {}
    days = plan.deadline_days

    def point(p: dict[str, Any]) -> dict[str, Any]:
        option = options[p["option"]]
        return {
            "x": p["training_days"],
            "y": float(p["cost"]),
            "gpus": p["num_gpus"],
            "accelerator": option.accelerator,
            "option": f"{option.source}: {option.label}",
            "meets": meets(p, deadline_days=days, budget=plan.budget),
        }

    def shown(group: str) -> list[dict[str, Any]]:
        return [point(p) for p in result.get(group, []) if p["training_days"] <= CHART_DAYS * days]

    return {
        "currency": plan.currency,
        "deadline_days": days,
        "budget": None if plan.budget is None else float(plan.budget),
        "frontier": shown("frontier"),
        "points": shown("points"),
    }


def status_data(plan: CapacityPlan) -> dict[str, Any]:
    """The plan's status, in the keys the page's progress bar (progress.js) reads."""
    done = round(plan.progress * plan.chunks_total)  # progress is done / total
    live = plan.status == PlanStatus.RUNNING
    messages_by_status: dict[str, str] = {
        PlanStatus.QUEUED: f"{waiting_message()} {done} of {plan.chunks_total} chunks done",
        PlanStatus.RUNNING: f"Searching: {done} of {plan.chunks_total} chunks done",
    }
    message = messages_by_status.get(str(plan.status), plan.get_status_display())
    state = "running" if live else ("waiting" if plan.status == PlanStatus.QUEUED else plan.status)
    lost = plan_worker_lost(plan, now=timezone.now())
    if lost:
        state, message = "worker_lost", f"{lost} {done} of {plan.chunks_total} chunks done."
    return {
        "id": plan.pk,
        "status": plan.status,
        "status_label": plan.get_status_display(),
        "state": state,
        "state_message": message,
        "progress": plan.progress,
        "chunks_done": done,
        "chunks_total": plan.chunks_total,
        # The bar shows the share of chunks done in every state, queued (0 of N) included.
        "determinate": True,
        "percent": 100 * done // plan.chunks_total if plan.chunks_total else 0,
        "error": plan.error,
        "finished": plan.is_finished,
        "url": plan.get_absolute_url(),
    }


@login_required
@require_GET
def capacity_plan_detail(request: HttpRequest, pk: int) -> HttpResponse:
    plan = get_object_or_404(capacity_plans_for(request.user), pk=pk)
    options = _option_rows(plan)
    result = plan.result or {}
    feasible = result.get("feasible", [])
    context: dict[str, Any] = {
        "plan": plan,
        "options": options,
        "status": status_data(plan),
        "can_author": can_author(request.user, plan.organisation),
        "projects": projects_for(request.user)
        .filter(organisation=plan.organisation)
        .order_by("name"),
        "tokens_label": tokens_text(float(plan.scenario["training"]["tokens"])),
        "feasible_count": len(feasible),
        "feasible_rows": [_display(p, options, plan) for p in feasible[:FEASIBLE_SHOWN]],
        "frontier_rows": [_display(p, options, plan) for p in result.get("frontier", [])],
        "notes": [*plan.skipped, *result.get("notes", [])],
    }
    if result.get("points"):
        context["chart_data"] = _chart_data(plan, options)
    return render(request, "planner/capacity_plan.html", context)


@never_cache
@login_required
@require_GET
def capacity_plan_status(request: HttpRequest, pk: int) -> JsonResponse:
    """The plan's status for the page's progress bar, polled about once a second."""
    plan = get_object_or_404(capacity_plans_for(request.user), pk=pk)
    return JsonResponse(status_data(plan))


@login_required
@require_POST
def capacity_plan_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    plan = get_object_or_404(capacity_plans_for(request.user), pk=pk)
    try:
        plans.capacity_plan_cancel(user=request.user, plan=plan)
    except NotAllowed as error:
        return forbidden(request, error)
    except PlannerError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"Plan {plan.pk} cancelled: its remaining chunks are dropped.")
    return redirect(plan)


@login_required
@require_POST
def capacity_plan_rerun(request: HttpRequest, pk: int) -> HttpResponse:
    plan = get_object_or_404(capacity_plans_for(request.user), pk=pk)
    try:
        rerun = plans.capacity_plan_rerun(user=request.user, plan=plan)
    except NotAllowed as error:
        return forbidden(request, error)
    except PlannerError as error:
        messages.error(request, f"{error.field}: {error.message}" if error.field else error.message)
        return redirect(plan)
    messages.success(request, f"Plan {rerun.pk} asks plan {plan.pk}'s question of today's prices.")
    return redirect(rerun)


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


@login_required
@require_POST
def capacity_plan_scenario(request: HttpRequest, pk: int) -> HttpResponse:
    """Make one option of the plan a scenario (cluster, layout and price) in a project."""
    plan = get_object_or_404(capacity_plans_for(request.user), pk=pk)
    project_id = _int(request.POST.get("project"))
    projects = projects_for(request.user)
    project = projects.filter(pk=project_id).first() if project_id is not None else None
    option, num_gpus = _int(request.POST.get("option")), _int(request.POST.get("num_gpus"))
    if project is None or option is None or num_gpus is None:
        messages.error(request, "Pick a project of the plan's organisation and an option.")
        return redirect(plan)
    try:
        scenario = plans.capacity_option_scenario_create(
            user=request.user, plan=plan, option_index=option, num_gpus=num_gpus, project=project
        )
    except NotAllowed as error:
        return forbidden(request, error)
    except PlannerError as error:
        messages.error(request, f"{error.field}: {error.message}" if error.field else error.message)
        return redirect(plan)
    messages.success(request, f"Scenario '{scenario.name}' made from plan {plan.pk}.")
    return redirect(scenario)
