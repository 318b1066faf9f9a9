"""The pricing forms' dates: written and read as ISO, whatever the locale."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import ValidationError
from django.utils import translation

from pricing.forms import CsvUploadForm


@pytest.mark.parametrize("language", ["en-gb", "en-us", "de"])
def test_fetched_at_renders_as_iso(language: str, db: None) -> None:
    form = CsvUploadForm(
        initial={"fetched_at": datetime(2026, 4, 3, 9, 30, tzinfo=UTC)}, user=AnonymousUser()
    )
    with translation.override(language):
        assert 'value="2026-04-03 09:30"' in str(form["fetched_at"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-04-03 09:30", datetime(2026, 4, 3, 9, 30, tzinfo=UTC)),
        ("2026-04-03", datetime(2026, 4, 3, tzinfo=UTC)),
        ("03/04/2026", None),  # April in one locale, March in another: refused
    ],
)
def test_fetched_at_parses_iso_only(text: str, expected: datetime | None) -> None:
    field = CsvUploadForm.base_fields["fetched_at"]
    with translation.override("en-gb"):
        if expected is None:
            with pytest.raises(ValidationError, match="valid date"):
                field.clean(text)
        else:
            assert field.clean(text) == expected
