"""Domain errors of the pricing app.

Services, selectors and the pure maths raise these; the API, the pages, the admin and the
management commands translate them (the API into 400/409 responses). No web framework is
imported here, so :mod:`pricing.tco` can raise them too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lib.errors import DomainError


class PricingError(DomainError):
    """A pricing rule refused an operation.

    ``field`` names the input at fault when there is one, so a caller can show the message
    next to that input.
    """

    code = "pricing_error"


class PublishedBookImmutable(PricingError):
    """A published price book, or one of its entries, was about to change."""

    code = "published_book_immutable"
    kind = "conflict"


class PriceBookGone(PricingError):
    """The price book was deleted before the operation could lock it."""

    code = "price_book_gone"
    kind = "conflict"


class DuplicateRecord(PricingError):
    """The record would duplicate one that exists (same natural key)."""

    code = "duplicate"
    kind = "conflict"


class PricingNotAllowed(PricingError):
    """The user may not change the prices of that organisation (or public prices)."""

    code = "not_allowed"
    kind = "forbidden"


class QuoteNotSelectable(PricingError):
    """A vendor quote is expired or not yet valid on the date it would be used."""

    code = "quote_not_selectable"


class NoExchangeRate(PricingError):
    """No exchange rate exists on or before the date of a conversion."""

    code = "no_exchange_rate"


@dataclass(frozen=True)
class CsvRowError:
    """One problem in an imported CSV file. ``line`` counts from 1 (the header line)."""

    line: int
    column: str
    reason: str

    def __str__(self) -> str:
        where = f"line {self.line}" + (f", column {self.column}" if self.column else "")
        return f"{where}: {self.reason}"


class CsvImportError(PricingError):
    """A CSV file had problems; nothing of it was imported."""

    code = "csv_invalid"

    def __init__(self, errors: list[CsvRowError]) -> None:
        noun = "problem" if len(errors) == 1 else "problems"
        super().__init__(f"{len(errors)} {noun} in the file; nothing was imported.")
        self.errors = errors

    def details(self) -> dict[str, Any]:
        return {
            "errors": [
                {"line": e.line, "column": e.column, "reason": e.reason} for e in self.errors
            ]
        }
