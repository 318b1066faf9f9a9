from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from planner.budgets.selectors import INBOX_SHOWN, budget_inbox
from planner.scenarios.views.reads import dashboard_context


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    """The user's inbox above the dashboard of their projects; the introduction for visitors."""
    if request.user.is_authenticated:
        inbox = budget_inbox(request.user)
        context = {
            **dashboard_context(request.user),
            "inbox": inbox,
            "inbox_awaiting": list(inbox.awaiting[:INBOX_SHOWN]),
            "inbox_changes_requested": list(inbox.changes_requested[:INBOX_SHOWN]),
            "inbox_approved": list(inbox.approved[:INBOX_SHOWN]),
        }
        return render(request, "planner/dashboard.html", context)
    return render(request, "planner/home.html")
