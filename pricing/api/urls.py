"""The pricing endpoints, registered on the project's one router in ``trainplan/api_urls.py``."""

from __future__ import annotations

from rest_framework.routers import BaseRouter

from pricing.api import views

ROUTES = (
    ("accelerators", views.AcceleratorViewSet, "accelerator"),
    ("providers", views.ProviderViewSet, "provider"),
    ("price-books", views.PriceBookViewSet, "price-book"),
    ("price-entries", views.PriceEntryViewSet, "price-entry"),
    ("quotes", views.QuoteViewSet, "quote"),
    ("onprem-profiles", views.OnPremProfileViewSet, "onprem-profile"),
    ("exchange-rates", views.ExchangeRateViewSet, "exchange-rate"),
)


def pricing_routes_register(router: BaseRouter) -> None:
    for prefix, viewset, basename in ROUTES:
        router.register(prefix, viewset, basename=basename)
