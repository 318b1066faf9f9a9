"""The REST API under /api/v1/. Each app contributes its viewsets to one router."""

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from planner.urls import api_urlpatterns as planner_api_urlpatterns
from planner.urls import planner_routes_register
from pricing.api.urls import pricing_routes_register

router = DefaultRouter()
router.root_view_name = "api-root"
planner_routes_register(router)
pricing_routes_register(router)

urlpatterns = [
    *planner_api_urlpatterns,
    path("", include(router.urls)),
]
