"""Project pages: the list (the dashboard), a new project, a project with its scenarios,
its edit and delete pages."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import ProtectedError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods

from planner.common.errors import NotAllowed, PlannerError
from planner.common.forms import edit_is_stale, form_version, planner_error_add, versioned
from planner.common.views import can_author, forbidden
from planner.scenarios import selectors, services
from planner.scenarios.forms import ProjectEditForm, ProjectForm
from planner.scenarios.models import Project
from planner.scenarios.views.authoring import delete_page, refusal
from planner.scenarios.views.reads import (
    ProjectSummary,
    author_organisations,
    dashboard_context,
    scenario_rows,
)

NOT_A_REQUESTER = NotAllowed(
    "Only a requester of an organisation may create projects; ask an administrator of your "
    "organisation for the requester role."
)


@login_required
@require_GET
def project_list(request: HttpRequest) -> HttpResponse:
    return render(request, "planner/dashboard.html", dashboard_context(request.user))


@login_required
@require_http_methods(["GET", "POST"])
def project_create(request: HttpRequest) -> HttpResponse:
    organisations = author_organisations(request.user)
    if not organisations:
        return forbidden(request, NOT_A_REQUESTER)
    form = ProjectForm(request.POST or None, organisations=organisations)
    if request.method == "POST" and form.is_valid():
        try:
            project = services.project_create(user=request.user, **form.cleaned_data)
        except NotAllowed as error:
            return forbidden(request, error)
        except PlannerError as error:
            planner_error_add(form, error)
        else:
            messages.success(request, f"Created the project '{project.name}'.")
            return redirect(project)
    return render(request, "planner/project_form.html", {"form": form})


def _visible_project(request: HttpRequest, pk: int) -> Project:
    return get_object_or_404(selectors.projects_for(request.user), pk=pk)


@login_required
@require_GET
def project_detail(request: HttpRequest, pk: int) -> HttpResponse:
    project = _visible_project(request, pk)
    rows = scenario_rows(project)
    context = {
        "project": project,
        "rows": rows,
        "summary": ProjectSummary(project, rows),
        "can_author": can_author(request.user, project.organisation),
        "comparisons": project.comparisons.all(),
        "active_runs": [row.latest for row in rows if row.is_active],
        "today": timezone.localdate(),
    }
    return render(request, "planner/project_detail.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def project_edit(request: HttpRequest, pk: int) -> HttpResponse:
    project = _visible_project(request, pk)
    if not can_author(request.user, project.organisation):
        return forbidden(request, refusal(project, "edit projects"))
    initial = versioned(ProjectEditForm.initial_from(project), project)
    form = ProjectEditForm(request.POST or None, initial=initial)
    if (
        request.method == "POST"
        and form.is_valid()
        and not edit_is_stale(request, form, project, what="project")
    ):
        try:
            services.project_update(user=request.user, project=project, **form.cleaned_data)
        except NotAllowed as error:
            return forbidden(request, error)
        except PlannerError as error:
            planner_error_add(form, error)
        else:
            messages.success(request, f"Saved the project '{project.name}'.")
            return redirect(project)
    context = {"form": form, "project": project, "version": form_version(form)}
    return render(request, "planner/project_form.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def project_delete(request: HttpRequest, pk: int) -> HttpResponse:
    """Ask first; a project whose runs carry budget requests, or with an audit trail, stays."""
    project = _visible_project(request, pk)
    if not can_author(request.user, project.organisation):
        return forbidden(request, refusal(project, "delete projects"))
    if request.method == "POST":
        try:
            services.project_delete(user=request.user, project=project)
        except NotAllowed as error:
            return forbidden(request, error)
        except ProtectedError as error:
            return delete_page(request, project, error=error)
        messages.success(request, f"Deleted the project '{project.name}'.")
        return redirect("planner:project-list")
    return delete_page(request, project)
