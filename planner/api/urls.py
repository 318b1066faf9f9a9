"""The REST API under /api/v1/. Each app contributes its viewsets to one router."""

from django.urls import include, path
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.routers import DefaultRouter

router = DefaultRouter()
router.root_view_name = "api-root"

urlpatterns = [
    path("auth/token/", ObtainAuthToken.as_view(), name="api-token"),
    path("", include(router.urls)),
]
