"""Saving a comparison of scenarios."""

from __future__ import annotations

from django import forms


class ComparisonSaveForm(forms.Form):
    name = forms.CharField(max_length=200, label="Save this comparison as")
