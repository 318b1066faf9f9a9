from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from organisations.models import Organisation
from pricing.errors import CsvImportError, PricingError
from pricing.models import PriceBook
from pricing.services import csv_text_decode, price_book_csv_import, quote_csv_import


def _datetime(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad date {text!r}: use YYYY-MM-DD[THH:MM]") from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


class Command(BaseCommand):
    help = (
        "Import a CSV file of price-book entries or vendor quotes: the whole file or nothing. "
        "The columns are documented in pricing/data/README.md."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("kind", choices=["price-book", "quotes"])
        parser.add_argument("file", type=Path)
        parser.add_argument(
            "--organisation",
            help="name of the organisation whose quotes or private book these are "
            "(required for quotes; without it a new book is public)",
        )
        book = parser.add_argument_group("price-book: an existing draft, or a new one")
        book.add_argument("--book", type=int, help="id of a draft price book")
        book.add_argument("--name", help="name of a new draft price book")
        book.add_argument("--currency", default="USD")
        book.add_argument("--source", help="where the prices come from")
        book.add_argument("--fetched-at", type=_datetime, help="when they were collected")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            text = csv_text_decode(options["file"].read_bytes())
            organisation = self._organisation(options["organisation"])
            if options["kind"] == "quotes":
                if organisation is None:
                    raise CommandError("--organisation is required for quotes")
                quotes = quote_csv_import(text=text, user=None, organisation=organisation)
                self.stdout.write(self.style.SUCCESS(f"Imported {len(quotes)} quotes."))
                return
            target = self._target(options, organisation)
            result = price_book_csv_import(text=text, user=None, **target)
        except CsvImportError as error:
            lines = [error.message, *(f"  {problem}" for problem in error.errors)]
            raise CommandError("\n".join(lines)) from None
        except (PricingError, OSError) as error:
            raise CommandError(str(error)) from None
        self.stdout.write(
            self.style.SUCCESS(
                f"Imported {result.created} entries into draft price book "
                f"{result.book.pk} '{result.book.name}'."
            )
        )

    def _organisation(self, name: str | None) -> Organisation | None:
        if name is None:
            return None
        organisation = Organisation.objects.filter(name=name).first()
        if organisation is None:
            raise CommandError(f"--organisation: no organisation named {name!r}")
        return organisation

    def _target(self, options: dict[str, Any], organisation: Organisation | None) -> dict[str, Any]:
        if options["book"] is not None:
            book = PriceBook.objects.filter(pk=options["book"]).first()
            if book is None:
                raise CommandError(f"no price book {options['book']}")
            return {"book": book}
        missing = [f"--{name}" for name in ("name", "source", "fetched_at") if not options[name]]
        if missing:
            raise CommandError(f"give --book, or {', '.join(missing)} for a new draft book")
        keys = ("name", "currency", "source", "fetched_at")
        return {"new_book": {key: options[key] for key in keys} | {"organisation": organisation}}
