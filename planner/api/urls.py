"""The REST API under /api/v1/. Each app contributes its viewsets to one router."""

from django.urls import include, path
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.routers import DefaultRouter

from planner.api.routes import planner_routes_register
from pricing.api.urls import pricing_routes_register

router = DefaultRouter()
router.root_view_name = "api-root"
planner_routes_register(router)
pricing_routes_register(router)

urlpatterns = [
    path("auth/token/", ObtainAuthToken.as_view(), name="api-token"),
    path("", include(router.urls)),
]
