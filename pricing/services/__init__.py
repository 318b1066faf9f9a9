"""Every write of the pricing app goes through these functions (``<entity>_<action>``).

They raise :class:`pricing.errors.PricingError` (never a web framework's exception) and hold
the rules: a published price book never changes, an expired quote cannot be chosen, a CSV
file imports whole or not at all.
"""

from pricing.services.books import (
    price_book_assert_draft,
    price_book_copy,
    price_book_create,
    price_book_delete,
    price_book_locked_draft,
    price_book_publish,
    price_book_update,
    price_entry_create,
    price_entry_delete,
    price_entry_update,
    price_per_accelerator_hour_derive,
)
from pricing.services.catalog import (
    CatalogSyncResult,
    accelerator_catalog_sync,
    accelerator_custom_create,
    accelerator_custom_update,
    provider_create,
    provider_update,
)
from pricing.services.csv_import import (
    QUOTE_CSV_COLUMNS,
    PriceBookImport,
    csv_text_decode,
    price_book_csv_import,
    quote_csv_import,
)
from pricing.services.onprem import (
    onprem_inputs_from,
    onprem_profile_create,
    onprem_profile_delete,
    onprem_profile_update,
)
from pricing.services.quotes import (
    quote_assert_selectable,
    quote_create,
    quote_delete,
    quote_expire,
    quote_price_per_hour_derive,
    quote_update,
)
from pricing.services.rates import exchange_rate_create

__all__ = [
    "QUOTE_CSV_COLUMNS",
    "CatalogSyncResult",
    "PriceBookImport",
    "accelerator_catalog_sync",
    "accelerator_custom_create",
    "accelerator_custom_update",
    "csv_text_decode",
    "exchange_rate_create",
    "onprem_inputs_from",
    "onprem_profile_create",
    "onprem_profile_delete",
    "onprem_profile_update",
    "price_book_assert_draft",
    "price_book_copy",
    "price_book_create",
    "price_book_csv_import",
    "price_book_delete",
    "price_book_locked_draft",
    "price_book_publish",
    "price_book_update",
    "price_entry_create",
    "price_entry_delete",
    "price_entry_update",
    "price_per_accelerator_hour_derive",
    "provider_create",
    "provider_update",
    "quote_assert_selectable",
    "quote_create",
    "quote_csv_import",
    "quote_delete",
    "quote_expire",
    "quote_price_per_hour_derive",
    "quote_update",
]
