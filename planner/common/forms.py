"""What the planner's forms share: quantities such as ``2T``, ISO dates, service errors on
fields."""

from __future__ import annotations

import re
from typing import Any

from django import forms

from estimator.core import schema
from estimator.core.presets import ModelPreset
from planner.common.errors import PlannerError

#: ``training.tokens``, whose bounds are the estimator's own.
TOKENS = schema.key("training.tokens")
MAX_TOKENS = float(TOKENS.maximum or "inf")
_SUFFIXES = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12, "p": 1e15}


def quantity_parse(text: str) -> float:
    """``"2T"``, ``"300B"``, ``"2e12"`` or ``"2,000,000"`` as a float; ValueError otherwise."""
    cleaned = text.strip().replace(",", "").replace("_", "").replace(" ", "")
    match = re.fullmatch(r"([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)([kmbgtp]?)", cleaned.lower())
    if not match:
        raise ValueError(text)
    number, suffix = match.groups()
    return float(number) * _SUFFIXES.get(suffix, 1.0)


def quantity_format(value: float) -> str:
    """``1.5e13`` as ``15T``: the inverse of :func:`quantity_parse`, exact when it can be."""
    for suffix, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        scaled = value / scale
        if scaled >= 1 and quantity_parse(f"{scaled:g}{suffix}") == value:
            return f"{scaled:g}{suffix}"
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def tokens_parse(text: str) -> float | None:
    """A tokens field: blank is None (the preset's figure), else a positive quantity."""
    if not text.strip():
        return None
    try:
        tokens = quantity_parse(text)
    except ValueError:
        raise forms.ValidationError("Write a number of tokens such as 2T, 300B or 2e12.") from None
    if not TOKENS.within(tokens):
        raise forms.ValidationError(
            f"Train on between {TOKENS.minimum:g} and {MAX_TOKENS:.0e} tokens."
        )
    return tokens


def planner_error_add(form: forms.Form, error: PlannerError) -> None:
    """Show a service's refusal on the form field it names, else above the form.

    Errors about the scenario JSON (``spec.<key>``) already start with ``<key>: ``; on a
    field of its own that prefix is dropped, above the form it stays, written as the form
    calls that part of the document (``spec_prefix``).
    """
    key = error.field or ""
    inner = key.removeprefix("spec.")
    names_key = key.startswith("spec.") and error.message.startswith(f"{inner}: ")
    target = form.error_field(key) if hasattr(form, "error_field") else key
    if target and target in form.fields:
        message = error.message[len(inner) + 2 :] if names_key and target != "spec" else None
        form.add_error(target, message or error.message)
    elif names_key:
        form.add_error(None, getattr(form, "spec_prefix", "") + error.message)
    else:
        form.add_error(None, f"{key}: {error.message}" if key else error.message)


#: How a form writes and reads a date: what ``<input type="date">`` holds, whatever the locale.
ISO_DATE_FORMAT = "%Y-%m-%d"


class DateInput(forms.DateInput):
    """The browser's date picker. Its value must be ``yyyy-mm-dd``: a browser empties a date
    input holding anything else (a localised ``22/04/2027``), so saving the form would erase
    the date."""

    input_type = "date"

    def __init__(self, attrs: dict[str, Any] | None = None, format: str | None = None) -> None:
        super().__init__(attrs, format=format or ISO_DATE_FORMAT)


class DateField(forms.DateField):
    """A date that renders and parses as ISO ``yyyy-mm-dd`` only, whatever LANGUAGE_CODE:
    ``03/04/2027`` would be April in one locale and March in another."""

    widget = DateInput
    input_formats = (ISO_DATE_FORMAT,)


def preset_label(preset: ModelPreset) -> str:
    billions = preset.published_parameters / 1e9
    return f"{preset.name} ({billions:,.0f} B parameters)"


def choice_field(form: forms.Form, name: str) -> forms.ChoiceField:
    field = form.fields[name]
    assert isinstance(field, forms.ChoiceField)
    return field


# --- Edits opened before someone else's save ------------------------------------------------

#: The hidden field an edit form carries: the row's ``updated_at`` when the form was opened.
VERSION_FIELD = "version"
STALE_EDIT = (
    "Changed by someone else since you opened it (saved at {when} UTC): your changes are not "
    "saved. The page below shows what you entered; compare it with the current {what} "
    "(open it in another tab), then save again to keep yours."
)


def versioned(initial: dict[str, Any], instance: Any) -> dict[str, Any]:
    """``initial`` with the version of ``instance`` the form is opened at."""
    return {**initial, VERSION_FIELD: instance.updated_at.isoformat()}


def edit_is_stale(request: Any, form: forms.Form, instance: Any, *, what: str) -> bool:
    """Whether ``instance`` was saved by someone else after the posted form was opened; if
    so the form says it, above its fields, and carries the current version, so a second
    save after review keeps the user's values. A form posted without a version (an old
    page) is not checked."""
    opened = request.POST.get(VERSION_FIELD)
    current = (
        type(instance)
        ._default_manager.filter(pk=instance.pk)
        .values_list("updated_at", flat=True)
        .first()
    )
    if not opened or current is None or opened == current.isoformat():
        return False
    form.add_error(None, STALE_EDIT.format(when=f"{current:%Y-%m-%d %H:%M:%S}", what=what))
    data = request.POST.copy()
    data[VERSION_FIELD] = current.isoformat()
    form.data = data
    return True


def form_version(form: forms.Form) -> str:
    """The version the page's hidden ``version`` input carries: the posted one (updated by
    :func:`edit_is_stale`) once the form was sent, else the one it was opened at
    (:func:`versioned` in its ``initial``)."""
    source = form.data if form.is_bound else form.initial
    return str(source.get(VERSION_FIELD) or "")
