from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from planner.health import system_health
from planner.views.reads import dashboard_context


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    """The dashboard of the user's projects; the introduction for visitors."""
    if request.user.is_authenticated:
        return render(request, "planner/dashboard.html", dashboard_context(request.user))
    return render(request, "planner/home.html")


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    statuses = system_health()
    down = sorted(name for name, status in statuses.items() if not status.up)
    body = {
        "status": "ok" if not down else "degraded",
        "down": down,
        "services": {name: status.as_dict() for name, status in statuses.items()},
    }
    return JsonResponse(body, status=503 if down else 200)
