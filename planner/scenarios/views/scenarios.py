"""Scenario pages: the form (create, edit), the JSON editor, import and export, the summary,
the delete page."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import ProtectedError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.text import slugify
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from estimator.core import schema
from planner.common.errors import NotAllowed, PlannerError
from planner.common.forms import edit_is_stale, form_version, planner_error_add, versioned
from planner.common.views import can_author, forbidden
from planner.scenarios import selectors, services
from planner.scenarios.breakdowns import training_summary
from planner.scenarios.forms import (
    ScenarioForm,
    ScenarioImportForm,
    ScenarioJsonForm,
    preset_matching,
    presets_for_page,
    recipes_for_page,
)
from planner.scenarios.models import Project, RunStatus, Scenario
from planner.scenarios.views.authoring import delete_page, refusal
from planner.scenarios.views.figures import layout_parts, run_figures
from planner.scenarios.views.reads import tokens_text

#: The scenario schema's defaults, shown when a scenario leaves its margins out.
DEFAULT_MARGINS = schema.defaults("margins")


def _author_project(request: HttpRequest, pk: int) -> Project:
    return get_object_or_404(selectors.projects_for(request.user), pk=pk)


def _form_page(
    request: HttpRequest,
    form: ScenarioForm,
    project: Project,
    scenario: Scenario | None,
    recipe_id: str = "",
    *,
    version: str = "",
) -> HttpResponse:
    recipes = recipes_for_page()
    context = {
        "version": version,
        "form": form,
        "project": project,
        "scenario": scenario,
        "presets": presets_for_page(),
        "recipes": recipes,
        "recipe": recipes.get(recipe_id),
        "recipe_id": recipe_id if recipe_id in recipes else "",
    }
    return render(request, "planner/scenario_form.html", context)


def _saved(request: HttpRequest, scenario: Scenario, text: str) -> HttpResponse:
    """Say it is saved, and warn at once when its stated layout does not fit in memory."""
    messages.success(request, text)
    note = services.scenario_fit_note(scenario.spec)
    if note:
        messages.warning(request, note)
    return redirect(scenario)


@login_required
@require_http_methods(["GET", "POST"])
def scenario_create(request: HttpRequest, pk: int) -> HttpResponse:
    project = _author_project(request, pk)
    if not can_author(request.user, project.organisation):
        return forbidden(request, refusal(project, "add scenarios"))
    # "Start from a recipe" (works without scripts); a failed save keeps the recipe chosen.
    recipe_id = request.POST.get("recipe") or request.GET.get("recipe", "")
    form = ScenarioForm(
        request.POST or None,
        initial=ScenarioForm.initial_for_new(recipe_id),
        organisation=project.organisation,
    )
    if request.method == "POST" and form.is_valid():
        try:
            scenario = services.scenario_create(
                user=request.user, project=project, **form.service_arguments()
            )
        except NotAllowed as error:
            return forbidden(request, error)
        except PlannerError as error:
            planner_error_add(form, error)
        else:
            return _saved(request, scenario, f"Added the scenario '{scenario.name}'.")
    return _form_page(request, form, project, None, recipe_id)


@login_required
@require_http_methods(["GET", "POST"])
def scenario_edit(request: HttpRequest, pk: int) -> HttpResponse:
    scenario = get_object_or_404(selectors.scenarios_for(request.user), pk=pk)
    if not can_author(request.user, scenario.project.organisation):
        return forbidden(request, refusal(scenario.project, "edit scenarios"))
    initial = versioned(ScenarioForm.initial_from(scenario), scenario)
    form = ScenarioForm(
        request.POST or None,
        initial=initial,
        base_spec=scenario.spec,
        current_price=scenario.price,
        organisation=scenario.project.organisation,
    )
    if (
        request.method == "POST"
        and form.is_valid()
        and not edit_is_stale(request, form, scenario, what="scenario")
    ):
        try:
            services.scenario_update(
                user=request.user, scenario=scenario, **form.service_arguments()
            )
        except NotAllowed as error:
            return forbidden(request, error)
        except PlannerError as error:
            planner_error_add(form, error)
        else:
            return _saved(request, scenario, "Saved. Runs made before keep the inputs they used.")
    return _form_page(request, form, scenario.project, scenario, version=form_version(form))


@login_required
@require_http_methods(["GET", "POST"])
def scenario_json_edit(request: HttpRequest, pk: int) -> HttpResponse:
    """Advanced: the scenario JSON itself, checked by the estimator when saved."""
    scenario = get_object_or_404(selectors.scenarios_for(request.user), pk=pk)
    if not can_author(request.user, scenario.project.organisation):
        return forbidden(request, refusal(scenario.project, "edit scenarios"))
    initial = versioned({"spec": json.dumps(scenario.spec, indent=2)}, scenario)
    form = ScenarioJsonForm(request.POST or None, initial=initial)
    if (
        request.method == "POST"
        and form.is_valid()
        and not edit_is_stale(request, form, scenario, what="scenario")
    ):
        spec = form.cleaned_data["spec"]
        model = spec.get("model") if isinstance(spec, dict) else None
        preset = preset_matching(model, scenario.model_preset) if isinstance(model, dict) else ""
        try:
            services.scenario_update(
                user=request.user, scenario=scenario, spec=spec, model_preset=preset
            )
        except NotAllowed as error:
            return forbidden(request, error)
        except PlannerError as error:
            planner_error_add(form, error)
        else:
            return _saved(request, scenario, "Saved the scenario JSON.")
    context = {
        "form": form,
        "scenario": scenario,
        "project": scenario.project,
        "version": form_version(form),
    }
    return render(request, "planner/scenario_json.html", context)


@login_required
@require_GET
def scenario_export(request: HttpRequest, pk: int) -> HttpResponse:
    """The scenario as a JSON file that "Import scenario JSON" reads back."""
    scenario = get_object_or_404(selectors.scenarios_for(request.user), pk=pk)
    response = JsonResponse(services.scenario_export(scenario), json_dumps_params={"indent": 2})
    filename = f"{slugify(scenario.name) or 'scenario'}.trainplan.json"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@login_required
@require_http_methods(["GET", "POST"])
def scenario_import(request: HttpRequest, pk: int) -> HttpResponse:
    project = _author_project(request, pk)
    if not can_author(request.user, project.organisation):
        return forbidden(request, refusal(project, "import scenarios"))
    form = ScenarioImportForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        try:
            scenario = services.scenario_import(
                user=request.user, project=project, document=form.cleaned_data["parsed"]
            )
        except NotAllowed as error:
            return forbidden(request, error)
        except PlannerError as error:
            planner_error_add(form, error)
        else:
            return _saved(request, scenario, f"Imported the scenario '{scenario.name}'.")
    return render(request, "planner/scenario_import.html", {"form": form, "project": project})


@login_required
@require_GET
def scenario_detail(request: HttpRequest, pk: int) -> HttpResponse:
    scenario = get_object_or_404(selectors.scenarios_for(request.user), pk=pk)
    runs = list(scenario.runs.select_related("created_by"))
    succeeded = next((run for run in runs if run.status == RunStatus.SUCCEEDED), None)
    latest = runs[0] if runs else None
    context = {
        "scenario": scenario,
        "project": scenario.project,
        "spec": scenario.spec,
        "layout": layout_parts(scenario.spec["parallelism"]),
        "tokens_label": tokens_text(float(scenario.spec["training"]["tokens"])),
        "training_summary": training_summary(scenario.spec["training"]),
        "margins": {**DEFAULT_MARGINS, **scenario.spec.get("margins", {})},
        "price": services.price_snapshot(scenario),
        "runs": runs,
        "latest": latest,
        "figures_run": succeeded,
        "figures": run_figures(succeeded) if succeeded else None,
        "can_author": can_author(request.user, scenario.project.organisation),
    }
    return render(request, "planner/scenario_detail.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def scenario_delete(request: HttpRequest, pk: int) -> HttpResponse:
    """Ask first; a scenario with a run that a budget request was made from stays."""
    scenario = get_object_or_404(selectors.scenarios_for(request.user), pk=pk)
    project = scenario.project
    if not can_author(request.user, project.organisation):
        return forbidden(request, refusal(project, "delete scenarios"))
    if request.method == "POST":
        try:
            services.scenario_delete(user=request.user, scenario=scenario)
        except NotAllowed as error:
            return forbidden(request, error)
        except ProtectedError as error:
            return delete_page(request, project, scenario, error=error)
        messages.success(request, f"Deleted the scenario '{scenario.name}'.")
        return redirect(project)
    return delete_page(request, project, scenario)


@login_required
@require_POST
def scenario_duplicate(request: HttpRequest, pk: int) -> HttpResponse:
    """A copy of the scenario in its project (same price, PUE and utilisation), to edit."""
    scenario = get_object_or_404(selectors.scenarios_for(request.user), pk=pk)
    try:
        copy = services.scenario_duplicate(user=request.user, scenario=scenario)
    except NotAllowed as error:
        return forbidden(request, error)
    except PlannerError as error:
        messages.error(request, error.message)
        return redirect(scenario)
    messages.success(request, f"Copied '{scenario.name}' as '{copy.name}'.")
    return redirect(copy)
