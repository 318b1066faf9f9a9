"""Django admin for the pricing models.

Published price books and their entries are read-only here (no change, delete or add
permission), and every admin form runs the services' checks, so the admin cannot write what
the API refuses. Writes of books, entries, usage prices, quotes and profiles go through the
services.

Books, entries, usage prices (storage, egress), quotes and profiles are listed for the
organisations the user belongs to (public books too; a superuser sees all), and change only
for whom :mod:`pricing.access` says may change them (a usage price: whoever may change its
book).
"""

from pricing.admin import books, catalog, records

__all__ = ["books", "catalog", "records"]
