"""The project form: a new project, and an existing one edited."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django import forms

from organisations.models import Organisation
from planner.common.forms import DateField
from planner.scenarios.models import Project


class ProjectForm(forms.Form):
    """A new project, in one of the organisations where the user may author."""

    organisation = forms.ModelChoiceField(queryset=Organisation.objects.none(), empty_label=None)
    name = forms.CharField(max_length=200)
    goal = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="What the model is for and what done looks like.",
    )
    deadline = DateField(required=False, help_text="Training must end by")
    budget_ceiling = forms.DecimalField(
        required=False, max_digits=18, decimal_places=2, help_text="The most finance will sign off"
    )
    currency = forms.CharField(
        max_length=3, initial="USD", widget=forms.TextInput(attrs={"list": "currencies"})
    )

    def __init__(self, *args: Any, organisations: Iterable[Organisation], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        allowed = [organisation.pk for organisation in organisations]
        field = self.fields["organisation"]
        assert isinstance(field, forms.ModelChoiceField)
        field.queryset = Organisation.objects.filter(pk__in=allowed)

    def clean_currency(self) -> str:
        return str(self.cleaned_data["currency"]).strip().upper()


class ProjectEditForm(ProjectForm):
    """The project form for a project that exists: a project stays in its organisation."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, organisations=(), **kwargs)
        del self.fields["organisation"]

    @classmethod
    def initial_from(cls, project: Project) -> dict[str, Any]:
        return {name: getattr(project, name) for name in cls.base_fields if name != "organisation"}
