"""REST endpoints of the pricing app: each write parses its input and calls one service."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from pricing import access, selectors, services
from pricing.api import filters
from pricing.api import serializers as io
from pricing.api.base import PricingModelViewSet
from pricing.models import (
    Accelerator,
    ExchangeRate,
    OnPremProfile,
    PriceBook,
    PriceEntry,
    Provider,
    VendorQuote,
)
from pricing.tco import onprem_cost

READ_AND_CREATE = ["get", "post", "head", "options"]
NO_DELETE = ["get", "post", "put", "patch", "head", "options"]


class AcceleratorViewSet(PricingModelViewSet):
    """Accelerator SKUs: the estimator's catalog plus custom SKUs added by pricing admins."""

    queryset = Accelerator.objects.all()
    lookup_field = "catalog_id"
    lookup_value_regex = r"[A-Za-z0-9._-]+"
    filterset_class = filters.AcceleratorFilter
    output_serializer_class = io.AcceleratorOutput
    input_serializer_class = io.AcceleratorInput
    update_input_serializer_class = io.AcceleratorUpdateInput
    http_method_names = NO_DELETE

    def get_queryset(self) -> QuerySet[Accelerator]:
        return selectors.accelerator_list()

    def service_create(self, data: dict[str, Any]) -> Accelerator:
        return services.accelerator_custom_create(user=self.request.user, **data)

    def service_update(self, instance: Accelerator, data: dict[str, Any]) -> Accelerator:
        return services.accelerator_custom_update(accelerator=instance, **data)


class ProviderViewSet(PricingModelViewSet):
    """Cloud, GPU-cloud and on-prem providers."""

    queryset = Provider.objects.all()
    lookup_field = "slug"
    lookup_value_regex = r"[-a-zA-Z0-9_]+"  # a slug's characters: anything else is a 404
    filterset_class = filters.ProviderFilter
    output_serializer_class = io.ProviderOutput
    input_serializer_class = io.ProviderInput
    http_method_names = NO_DELETE

    def get_queryset(self) -> QuerySet[Provider]:
        return selectors.provider_list()

    def service_create(self, data: dict[str, Any]) -> Provider:
        return services.provider_create(**data)

    def service_update(self, instance: Provider, data: dict[str, Any]) -> Provider:
        return services.provider_update(provider=instance, **data)


class PriceBookViewSet(PricingModelViewSet):
    """Named, dated sets of prices. A published book cannot change: copy it to a new draft."""

    queryset = PriceBook.objects.all()
    filterset_class = filters.PriceBookFilter
    output_serializer_class = io.PriceBookOutput
    input_serializer_class = io.PriceBookInput

    def get_queryset(self) -> QuerySet[PriceBook]:
        return selectors.price_book_list(viewer=self.request.user)

    def service_create(self, data: dict[str, Any]) -> PriceBook:
        requested = data.pop("organisation", access.UNSET)
        organisation = access.write_organisation(self.request.user, requested, public_allowed=True)
        return services.price_book_create(user=self.request.user, organisation=organisation, **data)

    def service_update(self, instance: PriceBook, data: dict[str, Any]) -> PriceBook:
        access.organisation_unchanged(instance, data)
        return services.price_book_update(book=instance, user=self.request.user, **data)

    def service_delete(self, instance: PriceBook) -> None:
        services.price_book_delete(book=instance, user=self.request.user)

    @extend_schema(request=None, responses={200: io.PriceBookOutput})
    @action(detail=True, methods=["post"])
    def publish(self, request: Request, pk: str | None = None) -> Response:
        """Publish a draft: from then on neither it nor its entries can change."""
        return self.output(services.price_book_publish(book=self.get_object(), user=request.user))

    @extend_schema(
        request=io.PriceBookCopyInput,
        responses={
            201: io.PriceBookOutput,
            409: OpenApiResponse(description="The book was deleted while the copy waited for it"),
        },
    )
    @action(detail=True, methods=["post"])
    def copy(self, request: Request, pk: str | None = None) -> Response:
        """Copy a book and its entries into a new draft (``copied_from`` names the book)."""
        data = io.PriceBookCopyInput(data=request.data)
        data.is_valid(raise_exception=True)
        book = self.get_object()
        requested = data.validated_data.get("organisation", access.UNSET)
        copy = services.price_book_copy(
            book=book,
            user=request.user,
            name=data.validated_data.get("name"),
            organisation=access.copy_organisation(request.user, book, requested),
        )
        return self.output(copy, status.HTTP_201_CREATED)


class PriceEntryViewSet(PricingModelViewSet):
    """Prices per accelerator-hour, in the currency of their book."""

    queryset = PriceEntry.objects.all()
    filterset_class = filters.PriceEntryFilter
    output_serializer_class = io.PriceEntryOutput
    input_serializer_class = io.PriceEntryInput
    update_input_serializer_class = io.PriceEntryUpdateInput

    def get_queryset(self) -> QuerySet[PriceEntry]:
        return selectors.price_entry_list(viewer=self.request.user)

    def service_create(self, data: dict[str, Any]) -> PriceEntry:
        access.change_assert(self.request.user, data["book"])
        return services.price_entry_create(user=self.request.user, **data)

    def service_update(self, instance: PriceEntry, data: dict[str, Any]) -> PriceEntry:
        return services.price_entry_update(entry=instance, user=self.request.user, **data)

    def service_delete(self, instance: PriceEntry) -> None:
        services.price_entry_delete(entry=instance, user=self.request.user)


class QuoteViewSet(PricingModelViewSet):
    """Vendor quotes; ``validity_today`` flags expired ones, which budgets cannot choose."""

    queryset = VendorQuote.objects.all()
    filterset_class = filters.QuoteFilter
    output_serializer_class = io.QuoteOutput
    input_serializer_class = io.QuoteInput

    def get_queryset(self) -> QuerySet[VendorQuote]:
        return selectors.quote_list(viewer=self.request.user)

    def service_create(self, data: dict[str, Any]) -> VendorQuote:
        requested = data.pop("organisation", access.UNSET)
        organisation = access.write_organisation(self.request.user, requested, public_allowed=False)
        assert organisation is not None
        return services.quote_create(user=self.request.user, organisation=organisation, **data)

    def service_update(self, instance: VendorQuote, data: dict[str, Any]) -> VendorQuote:
        access.organisation_unchanged(instance, data)
        return services.quote_update(quote=instance, user=self.request.user, **data)

    def service_delete(self, instance: VendorQuote) -> None:
        services.quote_delete(quote=instance, user=self.request.user)


class OnPremProfileViewSet(PricingModelViewSet):
    """Cost profiles of clusters you own, each with its price per GPU-hour."""

    queryset = OnPremProfile.objects.all()
    output_serializer_class = io.OnPremProfileOutput
    input_serializer_class = io.OnPremProfileInput

    def get_queryset(self) -> QuerySet[OnPremProfile]:
        return selectors.onprem_profile_list(viewer=self.request.user)

    def get_permissions(self) -> Sequence[Any]:
        if self.action == "calculate":
            return [IsAuthenticated()]
        return super().get_permissions()

    def service_create(self, data: dict[str, Any]) -> OnPremProfile:
        requested = data.pop("organisation", access.UNSET)
        organisation = access.write_organisation(self.request.user, requested, public_allowed=False)
        assert organisation is not None
        return services.onprem_profile_create(
            user=self.request.user, organisation=organisation, **data
        )

    def service_update(self, instance: OnPremProfile, data: dict[str, Any]) -> OnPremProfile:
        access.organisation_unchanged(instance, data)
        return services.onprem_profile_update(profile=instance, user=self.request.user, **data)

    def service_delete(self, instance: OnPremProfile) -> None:
        services.onprem_profile_delete(profile=instance, user=self.request.user)

    @extend_schema(
        request=io.OnPremInput,
        responses={
            200: io.OnPremCostOutput,
            400: OpenApiResponse(description="A field is missing or out of range; it is named"),
        },
    )
    @action(detail=False, methods=["post"])
    def calculate(self, request: Request) -> Response:
        """Price per GPU-hour and its breakdown for the posted profile fields (nothing saved).

        Any signed-in user may call it.
        """
        data = io.OnPremInput(data=request.data)
        data.is_valid(raise_exception=True)
        fields = dict(data.validated_data)
        currency = fields.pop("currency")
        cost = onprem_cost(services.onprem_inputs_from(fields))
        return Response(io.OnPremCostOutput(io.onprem_cost_data(cost, currency)).data)


class ExchangeRateViewSet(PricingModelViewSet):
    """Dated exchange rates with their source; ``convert`` says which rate it used."""

    queryset = ExchangeRate.objects.all()
    filterset_class = filters.ExchangeRateFilter
    output_serializer_class = io.ExchangeRateOutput
    input_serializer_class = io.ExchangeRateInput
    http_method_names = READ_AND_CREATE

    def get_queryset(self) -> QuerySet[ExchangeRate]:
        return selectors.exchange_rate_list()

    def service_create(self, data: dict[str, Any]) -> ExchangeRate:
        return services.exchange_rate_create(**data)

    @extend_schema(
        parameters=[io.ConversionQuery],
        responses={
            200: io.ConvertedAmountOutput,
            400: OpenApiResponse(description="Bad input, or no rate on or before the date"),
        },
    )
    @action(detail=False, methods=["get"])
    def convert(self, request: Request) -> Response:
        """Convert an amount at the latest rate dated on or before ``on``."""
        query = io.ConversionQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = dict(query.validated_data)
        converted = selectors.money_convert(
            amount=params["amount"],
            from_currency=params["from_currency"],
            to_currency=params["to_currency"],
            on=params.get("on") or timezone.localdate(),
        )
        return Response(io.ConvertedAmountOutput(converted).data)
