from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularSwaggerView

from lib.api import SchemaView
from planner.accounts import views as accounts
from planner.scenarios.views.general import home
from trainplan import health

# Errors no view answered (unknown URL, body too large, an exception): JSON under /api/,
# and 503 instead of 500 while the database is unreachable (lib.http).
handler400 = "lib.http.bad_request"
handler403 = "lib.http.permission_denied"
handler404 = "lib.http.page_not_found"
handler500 = "lib.http.server_error"

urlpatterns = [
    path("", home, name="home"),
    path("livez", health.livez, name="livez"),
    path("readyz", health.readyz, name="readyz"),
    path("healthz", health.readyz, name="healthz"),
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
    path("", include("planner.urls")),
    # Before Django's auth urls: the login page with the lockout (lib.login_guard).
    path("accounts/login/", accounts.LoginView.as_view(), name="login"),
    # Before Django's too: the reset mail goes through the notification outbox.
    path(
        "accounts/password_reset/",
        accounts.PasswordResetView.as_view(),
        name="password_reset",
    ),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("pricing/", include("pricing.urls")),
    path("api/v1/", include("trainplan.api_urls")),
    path("api/schema/", SchemaView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
]
