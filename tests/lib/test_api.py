"""lib.api: both apps' domain errors answer alike, by their kind."""

from __future__ import annotations

import pytest
from django.db.models import ProtectedError
from rest_framework.exceptions import ValidationError

from lib.api import domain_error_body, exception_handler
from lib.errors import DomainError
from planner.common.errors import (
    NotAllowed,
    PlannerError,
    RunNotRetryable,
    SeparationOfDuties,
    TransitionRefused,
)
from pricing.errors import (
    CsvImportError,
    CsvRowError,
    DuplicateRecord,
    PricingError,
    PublishedBookImmutable,
)


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (PlannerError("must not be empty", field="name"), 400),
        (PricingError("must be positive", field="price"), 400),
        (NotAllowed("Only a requester may edit."), 403),
        (SeparationOfDuties("You wrote it."), 403),
        (TransitionRefused("It is approved already."), 409),
        (RunNotRetryable("only a failed run is retried"), 409),
        (PublishedBookImmutable("published"), 409),
        (DuplicateRecord("exists", field="slug"), 409),
    ],
)
def test_exception_handler_answers_each_kind_with_its_status(
    error: DomainError, status: int
) -> None:
    response = exception_handler(error, {})
    assert response is not None
    assert response.status_code == status
    assert (response.data["detail"], response.data["code"]) == (error.message, error.code)


def test_a_field_at_fault_is_named_like_a_serializer_error() -> None:
    body = domain_error_body(PricingError("must be positive", field="price_per_gpu_hour"))
    assert body["price_per_gpu_hour"] == ["must be positive"]
    assert "non_field_errors" not in body


def test_invalid_input_without_a_field_is_a_non_field_error() -> None:
    assert domain_error_body(PlannerError("bad"))["non_field_errors"] == ["bad"]


def test_a_refusal_without_a_field_names_none() -> None:
    assert set(domain_error_body(TransitionRefused("approved already"))) == {"detail", "code"}
    assert set(domain_error_body(NotAllowed("not yours"))) == {"detail", "code"}


def test_csv_problems_come_one_row_each() -> None:
    error = CsvImportError([CsvRowError(3, "price", "not a number"), CsvRowError(5, "", "empty")])
    body = domain_error_body(error)
    assert body["errors"] == [
        {"line": 3, "column": "price", "reason": "not a number"},
        {"line": 5, "column": "", "reason": "empty"},
    ]
    assert body["detail"] == "2 problems in the file; nothing was imported."


def test_a_protected_delete_is_a_409_naming_what_holds_it() -> None:
    response = exception_handler(ProtectedError("held", set()), {})
    assert response is not None
    assert response.status_code == 409
    assert response.data["code"] == "protected"


def test_other_errors_go_to_drf() -> None:
    response = exception_handler(ValidationError({"name": ["required"]}), {})
    assert response is not None
    assert response.status_code == 400
    assert response.data == {"name": ["required"]}
    assert exception_handler(KeyError("not ours"), {}) is None
