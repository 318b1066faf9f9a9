from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from planner.scenarios.views.reads import dashboard_context


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    """The dashboard of the user's projects; the introduction for visitors."""
    if request.user.is_authenticated:
        return render(request, "planner/dashboard.html", dashboard_context(request.user))
    return render(request, "planner/home.html")
