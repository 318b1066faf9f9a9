"""The scenario JSON editor and the import of an exported scenario document."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from django import forms
from django.core.files.uploadedfile import UploadedFile

from estimator.jsondepth import JsonTooDeep, json_loads

MAX_UPLOAD_BYTES = 1_000_000


def _json_load(text: str) -> Any:
    try:
        return json_loads(text)
    except JsonTooDeep as error:
        raise forms.ValidationError(f"Not valid JSON: {error}.") from None
    except json.JSONDecodeError as error:
        raise forms.ValidationError(
            f"Not valid JSON: {error.msg} at line {error.lineno}, column {error.colno}."
        ) from None


class ScenarioJsonForm(forms.Form):
    """The scenario JSON itself, for what the form does not cover (MoE, overrides, …)."""

    spec = forms.CharField(
        label="Scenario JSON",
        widget=forms.Textarea(attrs={"rows": 28, "spellcheck": "false", "class": "code"}),
    )

    def error_field(self, field: str | None) -> str | None:
        return "spec" if field and field.startswith("spec") else field

    def clean_spec(self) -> Any:
        return _json_load(self.cleaned_data["spec"])


class ScenarioImportForm(forms.Form):
    """An exported scenario document, uploaded as a file or pasted."""

    file = forms.FileField(required=False, label="JSON file")
    document = forms.CharField(
        required=False,
        label="…or paste the JSON",
        widget=forms.Textarea(attrs={"rows": 14, "spellcheck": "false", "class": "code"}),
    )

    #: The export document holds the scenario JSON under ``scenario``.
    spec_prefix = "scenario."

    def error_field(self, field: str | None) -> str | None:
        return None  # every key of the document is reported above the form, with its name

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        upload: UploadedFile | None = data.get("file")
        text = data.get("document") or ""
        if upload is not None:
            if upload.size is not None and upload.size > MAX_UPLOAD_BYTES:
                raise forms.ValidationError("The file is larger than 1 MB.")
            try:
                text = upload.read().decode("utf-8-sig")
            except UnicodeDecodeError:
                raise forms.ValidationError("The file is not UTF-8 text.") from None
        if not text.strip():
            raise forms.ValidationError("Upload an exported scenario file or paste its JSON.")
        data["parsed"] = _json_load(text)
        _finite_numbers_check(data["parsed"])
        return data


def _finite_numbers_check(document: Any) -> None:
    """Refuse NaN and infinite PUE or utilisation before they reach Decimal comparisons."""
    if not isinstance(document, dict):
        return
    utilisation = document.get("utilisation")
    values = [("pue", document.get("pue"))]
    values += [("utilisation", v) for v in utilisation] if isinstance(utilisation, list) else []
    for key, value in values:
        try:
            finite = value is None or Decimal(str(value)).is_finite()
        except ArithmeticError:
            finite = True  # not a number at all: the service names the key
        if not finite:
            raise forms.ValidationError(f"{key}: must be a finite number, got {value!r}")
