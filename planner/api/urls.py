"""The REST API under /api/v1/. Each app contributes its viewsets to one router."""

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from planner.accounts import api as auth
from planner.api.routes import planner_routes_register
from pricing.api.urls import pricing_routes_register

router = DefaultRouter()
router.root_view_name = "api-root"
planner_routes_register(router)
pricing_routes_register(router)

urlpatterns = [
    path("auth/token/", auth.TokenObtainView.as_view(), name="api-token"),
    path("auth/tokens/", auth.TokenListView.as_view(), name="api-token-list"),
    path("auth/tokens/<str:token_id>/", auth.TokenDetailView.as_view(), name="api-token-detail"),
    path("auth/logout/", auth.LogoutView.as_view(), name="api-logout"),
    path("auth/logout-all/", auth.LogoutAllView.as_view(), name="api-logout-all"),
    path("", include(router.urls)),
]
