"""A member of another organisation sees and changes nothing of the first one, on any route.

The routes come from the URL resolver, not from a list kept by hand: every pattern of the
pages, the pricing pages and ``/api/v1/`` is either walked here or named in :data:`PUBLIC`
(or :data:`ADMIN_PREFIX`, walked by the admin test) with the reason, so a new endpoint fails
:func:`test_every_route_is_walked_or_public` until someone decides which it is.

A route whose URL holds an id is called with the first organisation's object of the kind its
first path segment names (:data:`KINDS`): every method answers as it would for an id that
does not exist (404, or 405 for a method the route lacks; 403 only on action routes) and the
database is unchanged. A route without an id (a list, a page) answers the outsider without a
trace of the first organisation: no object name (each carries a marker) and, in API lists,
none of its ids.

The outsider is as strong as a non-superuser gets: every role in their own organisation
(pricing admin included), staff, and the admin permissions of the pricing models.

The pricing part (a private price book with an entry, a vendor quote and an on-prem profile,
each with ``organisation`` set to the first organisation) needs the ``organisation`` foreign
key on those models; until it exists those cases are expected to fail (``xfail``, strict).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth.models import Permission, User
from django.db.models import Model
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone
from rest_framework.test import APIClient

from organisations.models import Organisation, Role
from organisations.services import membership_grant, organisation_create
from planner.budgets.models import BudgetRequest
from planner.budgets.services import budget_request_create, budget_request_submit
from planner.capacity.models import CapacityPlan
from planner.capacity.services import (
    CapacityQuestion,
    capacity_chunk_execute,
    capacity_plan_create,
    capacity_plan_merge,
)
from planner.scenarios.models import Comparison, EstimationRun, Project, Scenario
from planner.scenarios.services import (
    comparison_create,
    project_create,
    run_execute,
    run_start,
    scenario_create,
)
from pricing.demo import pricing_demo_load
from pricing.models import Accelerator, OnPremProfile, PriceBook, PriceEntry, VendorQuote
from pricing.services import (
    onprem_profile_create,
    price_book_create,
    price_book_publish,
    price_entry_create,
    quote_create,
)
from pricing.services.onprem import PROFILE_FIELDS
from tests.planner.conftest import list_price, small_spec

pytestmark = pytest.mark.django_db

#: In the name of every planning object of the first organisation.
PLANNER_MARKER = "zqplanmark"
#: In the name of every private pricing record of the first organisation.
PRICING_MARKER = "zqpricemark"


def _token_model() -> type[Model] | None:
    """The API token model, once API tokens are knox's (per user, so hidden like the rest)."""
    if not apps.is_installed("knox"):
        return None
    from knox.models import AuthToken

    return AuthToken


TOKEN_MODEL = _token_model()
TOKEN_MODELS: tuple[type[Model], ...] = (TOKEN_MODEL,) if TOKEN_MODEL else ()
PLANNING_MODELS: tuple[type[Model], ...] = (
    Organisation, Project, Scenario, EstimationRun, Comparison, BudgetRequest, CapacityPlan,
    *TOKEN_MODELS,
)  # fmt: skip
PRICING_MODELS: tuple[type[Model], ...] = (PriceBook, PriceEntry, VendorQuote, OnPremProfile)


def _pricing_is_owned() -> bool:
    """Whether the pricing models carry the ``organisation`` foreign key yet."""
    names = {field.name for field in VendorQuote._meta.get_fields()}
    return "organisation" in names and all(
        "organisation" in {f.name for f in model._meta.get_fields()}
        for model in (OnPremProfile, PriceBook)
    )


pricing_owned = pytest.mark.xfail(
    not _pricing_is_owned(),
    reason="VendorQuote/OnPremProfile/PriceBook have no organisation foreign key yet",
    strict=True,
)

#: The segment before a route's id (``projects`` in ``projects/<int:pk>/edit/``) -> the model
#: that id is of.
KINDS: dict[str, type[Model]] = {
    "organisations": Organisation,
    "projects": Project,
    "scenarios": Scenario,
    "runs": EstimationRun,
    "comparisons": Comparison,
    "budgets": BudgetRequest,
    "capacity": CapacityPlan,
    "capacity-plans": CapacityPlan,
    "books": PriceBook,
    "price-books": PriceBook,
    "price-entries": PriceEntry,
    "quotes": VendorQuote,
    "onprem-profiles": OnPremProfile,
    # Shared by every organisation; walked with the first organisation's accelerator, so a
    # page listing its prices must leave the private ones out.
    "catalog": Accelerator,
    "accelerators": Accelerator,
    **({"tokens": TOKEN_MODEL} if TOKEN_MODEL else {}),
}

#: How a route names an object of these models, when not by its primary key.
LOOKUPS = {"Accelerator": "catalog_id", "AuthToken": "token_key"}

#: Objects every organisation shares: an outsider reads them (200) and writes what its role
#: allows, but the page shows nothing private of the first organisation.
SHARED_KINDS = (Accelerator,)

#: Routes an outsider may call, with why they reveal nothing of an organisation: by route
#: name, by template, or ``api-v1:<collection>`` for an API collection and its objects.
PUBLIC: dict[str, str] = {
    "livez": "liveness probe: answers 200 and nothing else",
    "readyz": "readiness probe: names services, never data",
    "healthz": "alias of readyz",
    "favicon.ico": "a redirect to a static file",
    "login": "the sign-in form",
    "logout": "signs the caller out",
    "password_change": "the caller's own password",
    "password_change_done": "a confirmation page",
    "password_reset": "sends mail to an address the caller types; shows nothing",
    "password_reset_done": "a confirmation page",
    "password_reset_confirm": "needs a token mailed to the account's owner",
    "password_reset_complete": "a confirmation page",
    "api-token": "exchanges the caller's own credentials for their token",
    "api-root": "links to the collections, no data",
    "api-schema": "the OpenAPI schema: shapes, no data",
    "api-docs": "the schema's viewer page",
    "api-v1:providers": "providers are shared by every organisation (no owner)",
    "api-v1:exchange-rates": "exchange rates are shared by every organisation (no owner)",
}

#: Routes under this prefix are Django's admin, walked by the two ``test_admin_*`` tests.
ADMIN_PREFIX = "admin/"

#: A suffix DRF adds to every route (``.json``): the same view as the route without it.
FORMAT_SUFFIX = re.compile(r"\\\.\(\?P<format>[^)]*\)/\?\$$|<drf_format_suffix:format>$")
PARAMETER = re.compile(r"<(?:\w+:)?(\w+)>|\(\?P<(\w+)>[^)]*\)")

WRITE_BODY = {"name": "taken", "title": "taken", "goal": "taken", "comment": "taken"}


@dataclass(frozen=True)
class Route:
    """One URL pattern: its full template (``projects/<int:pk>/``) and its name."""

    template: str
    name: str

    @property
    def parameters(self) -> list[str]:
        return [a or b for a, b in PARAMETER.findall(self.template)]

    @property
    def path(self) -> str:
        """The template without regex anchors, mount prefixes kept."""
        return self.template.replace("^", "").replace("$", "")

    @property
    def collection(self) -> str:
        """The segment naming what the id is of (``projects`` in ``projects/<pk>/edit/``);
        without an id, the last one (``projects`` in ``api/v1/projects/``)."""
        head = PARAMETER.split(self.path, maxsplit=1)[0]
        segments = [segment for segment in head.split("/") if segment]
        return segments[-1] if segments else ""

    @property
    def is_api(self) -> bool:
        return self.template.startswith("api/")

    @property
    def is_detail(self) -> bool:
        """An object's own URL (``/<id>/``), not an action or a file under it."""
        return bool(re.search(r"(<(?:\w+:)?\w+>|\(\?P<\w+>[^)]*\))/$", self.path))

    def url(self, value: object) -> str:
        return "/" + PARAMETER.sub(str(value), self.path)

    def public_reason(self) -> str | None:
        for key in (self.name, self.template, f"api-v1:{self.collection}"):
            if key in PUBLIC and (key != f"api-v1:{self.collection}" or self.is_api):
                return PUBLIC[key]
        return None


def _walk(resolver: URLResolver, prefix: str = "", namespace: str = "") -> Iterator[Route]:
    for pattern in resolver.url_patterns:
        template = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            inner = f"{namespace}{pattern.namespace}:" if pattern.namespace else namespace
            yield from _walk(pattern, template, inner)
        elif isinstance(pattern, URLPattern):
            yield Route(template, f"{namespace}{pattern.name}" if pattern.name else template)


def all_routes() -> list[Route]:
    return [route for route in _walk(get_resolver()) if not FORMAT_SUFFIX.search(route.template)]


def _walked_routes() -> list[Route]:
    return [
        route
        for route in all_routes()
        if not route.template.startswith(ADMIN_PREFIX) and route.public_reason() is None
    ]


# --- The first organisation's data ----------------------------------------------------------


@dataclass
class Tenant:
    organisation: Organisation
    objects: dict[type[Model], Model]

    def pk_of(self, model: type[Model]) -> object:
        instance = self.objects[model]
        return getattr(instance, LOOKUPS.get(model.__name__, "pk"))


def _owned(create: Callable[..., Any], organisation: Organisation, **values: Any) -> Any:
    """``create(...)`` the record, then make ``organisation`` its owner (when it has one).

    Written against the contract (an ``organisation`` foreign key), whatever the services'
    signatures turn out to be.
    """
    try:
        record = create(organisation=organisation, **values)
    except TypeError:
        record = create(**values)
    if "organisation" in {field.name for field in type(record)._meta.get_fields()}:
        type(record).objects.filter(pk=record.pk).update(organisation=organisation)
        record.refresh_from_db()
    return record


def _private_pricing(organisation: Organisation) -> dict[type[Model], Model]:
    accelerator = Accelerator.objects.get(catalog_id="H100-SXM")
    today = timezone.localdate()
    quote = _owned(
        quote_create,
        organisation,
        user=None,
        vendor=f"{PRICING_MARKER} Compute",
        reference=f"{PRICING_MARKER}-Q1",
        accelerator=accelerator,
        accelerator_count=256,
        price_basis=VendorQuote.PriceBasis.HOURLY,
        price_per_accelerator_hour=Decimal("1.2345"),
        currency="USD",
        valid_from=today - timedelta(days=1),
        valid_until=today + timedelta(days=365),
    )
    demo_profile = OnPremProfile.objects.order_by("pk").first()
    assert demo_profile is not None
    profile_values = {name: getattr(demo_profile, name) for name in PROFILE_FIELDS}
    profile = _owned(
        onprem_profile_create,
        organisation,
        user=None,
        **profile_values | {"name": f"{PRICING_MARKER} cluster"},
    )
    book = _owned(
        price_book_create,
        organisation,
        user=None,
        name=f"{PRICING_MARKER} negotiated rates",
        currency="USD",
        source=f"{PRICING_MARKER} contract",
        fetched_at=timezone.now(),
    )
    entry = price_entry_create(
        book=book,
        provider=list_price("H100-SXM").provider,
        region=f"{PRICING_MARKER}-region",
        accelerator=accelerator,
        pricing_type="on_demand",
        price_per_accelerator_hour=Decimal("1.1111"),
        source=f"{PRICING_MARKER} contract",
    )
    price_book_publish(book=book, user=None)
    return {VendorQuote: quote, OnPremProfile: profile, PriceBook: book, PriceEntry: entry}


def _member(username: str, organisation: Organisation, *roles: str) -> User:
    user = User.objects.create_user(username, password=f"{username}-pass")
    for role in roles:
        membership_grant(organisation=organisation, user=user, role=role)
    return user


def _token_of(user: User) -> dict[type[Model], Model]:
    """An API token of ``user`` (knox's manager answers the row and the token)."""
    if TOKEN_MODEL is None:
        return {}
    created: Any = TOKEN_MODEL._default_manager.create(user=user)
    return {TOKEN_MODEL: created[0]}


def _planning(organisation: Organisation, capture: Any) -> dict[type[Model], Model]:
    author = _member("maya", organisation, Role.REQUESTER)
    project = project_create(
        user=author, organisation=organisation, name=f"{PLANNER_MARKER} project"
    )
    scenarios = [
        scenario_create(
            user=author,
            project=project,
            name=f"{PLANNER_MARKER} scenario {gpus}",
            spec=small_spec("H100-SXM", gpus),
            price_source="price_entry",
            price=list_price("H100-SXM"),
        )
        for gpus in (64, 128)
    ]
    with capture(execute=False):
        started = run_start(user=author, scenario=scenarios[0], seed=7, samples=400)
    run = run_execute(run_id=started.pk)
    assert run is not None
    assert run.status == "succeeded", run.error
    comparison = comparison_create(
        user=author, project=project, name=f"{PLANNER_MARKER} comparison", scenarios=scenarios
    )
    with capture(execute=False):
        request = budget_request_create(
            user=author, run=run, title=f"{PLANNER_MARKER} budget", justification="needed"
        )
        budget_request_submit(user=author, request=request)
    plan = _capacity_plan(author, project, capture)
    return _token_of(author) | {
        CapacityPlan: plan,
        Organisation: organisation,
        Project: project,
        Scenario: scenarios[0],
        EstimationRun: run,
        Comparison: comparison,
        BudgetRequest: request,
        Accelerator: Accelerator.objects.get(catalog_id="H100-SXM"),
    }


def _capacity_plan(author: User, project: Project, capture: Any) -> CapacityPlan:
    """A finished plan of the project (its chunks searched here), named with the marker."""
    question = CapacityQuestion(
        deadline=timezone.localdate() + timedelta(days=3650),
        currency="USD",
        max_gpus=16,
        model_preset="llama3-8b",
        tokens=1e11,
        book=PriceBook.objects.filter(organisation=None, status="published").first(),
        include_onprem=False,
    )
    with capture(execute=False):
        plan = capacity_plan_create(user=author, question=question, project=project)
    for chunk in plan.chunks.all():
        capacity_chunk_execute(chunk_id=chunk.pk, task_id=chunk.task_id)
    capacity_plan_merge(plan_id=plan.pk)
    CapacityPlan.objects.filter(pk=plan.pk).update(name=f"{PLANNER_MARKER} capacity plan")
    plan.refresh_from_db()
    assert plan.status == "succeeded"
    assert plan.result
    assert plan.result["feasible"]
    return plan


@pytest.fixture
def tenant(db: None, django_capture_on_commit_callbacks: Any) -> Tenant:
    pricing_demo_load()
    organisation = organisation_create(name=f"{PLANNER_MARKER} Research")
    objects = _planning(organisation, django_capture_on_commit_callbacks)
    return Tenant(organisation, objects | _private_pricing(organisation))


@pytest.fixture
def outsider(db: None) -> User:
    """Every role in another organisation, staff, with the pricing models' admin rights."""
    other = organisation_create(name="Globex Labs")
    user = _member("otto", other, *Role.values)
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    codenames = [
        f"{action}_{model._meta.model_name}"
        for model in PRICING_MODELS
        for action in ("view", "add", "change", "delete")
    ]
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    return User.objects.get(pk=user.pk)  # drop the cached permissions


@pytest.fixture
def outsider_project(outsider: User) -> Project:
    """The outsider's own project, so their lists are not trivially empty."""
    organisation = Organisation.objects.get(name="Globex Labs")
    return project_create(user=outsider, organisation=organisation, name="Globex LM")


def _database() -> dict[str, list[dict[str, Any]]]:
    """Every row of every table but the sessions': a write anywhere shows here."""
    return {
        model._meta.label: list(model._base_manager.order_by("pk").values())
        for model in apps.get_models()
        if model._meta.app_label != "sessions"
    }


class Caller:
    """The outsider through the session (pages) or the API client (no CSRF shortcut)."""

    def __init__(self, user: User) -> None:
        self.page = Client()
        self.page.force_login(user)
        self.api = APIClient()
        self.api.force_authenticate(user)

    def call(self, route: Route, method: str, url: str) -> Any:
        if route.is_api:
            body = None if method in ("get", "delete") else WRITE_BODY
            return getattr(self.api, method)(url, body, format="json")
        if method == "get":
            return self.page.get(url)
        return getattr(self.page, method)(url, WRITE_BODY)


# --- The tests ------------------------------------------------------------------------------


def test_every_route_is_walked_or_public() -> None:
    """A route with an id needs its kind in KINDS; anything else is walked or PUBLIC."""
    unknown = [
        route.template
        for route in _walked_routes()
        if route.parameters and route.collection not in KINDS
    ]
    assert not unknown, (
        f"routes with an id of an unknown kind: {unknown}: add the kind to KINDS, or the "
        "route to PUBLIC with the reason an outsider may call it"
    )
    names = {route.name for route in _walked_routes()}
    for expected in ("planner:budget-detail", "pricing:price-book-detail", "budget-detail"):
        assert expected in names


def _status_for_nothing(caller: Caller, route: Route, method: str) -> int:
    """What the route answers for an id that does not exist."""
    missing = 987654321 if route.parameters[0] != "catalog_id" else "NO-SUCH-SKU"
    return int(caller.call(route, method, route.url(missing)).status_code)


def _refusals(route: Route) -> set[int]:
    return {404, 405} if route.is_detail else {403, 404, 405}


def _object_routes(models: tuple[type[Model], ...]) -> list[Route]:
    return [
        route
        for route in _walked_routes()
        if route.parameters and KINDS.get(route.collection) in models
    ]


def _outsider_walks_object_routes(
    outsider: User, tenant: Tenant, models: tuple[type[Model], ...]
) -> None:
    caller = Caller(outsider)
    before = _database()
    failures = []
    for route in _object_routes(models):
        kind = KINDS[route.collection]
        url = route.url(tenant.pk_of(kind))
        for method in ("get", "post", "put", "patch", "delete"):
            status = caller.call(route, method, url).status_code
            allowed = _refusals(route) if method != "get" else {404, 405}
            if status not in allowed:
                failures.append(f"{method.upper()} {url}: {status}, expected one of {allowed}")
            elif status != _status_for_nothing(caller, route, method):
                failures.append(f"{method.upper()} {url}: {status} tells the object exists")
        assert _database() == before, f"{route.template} changed the database"
    assert not failures, "\n".join(failures)


def test_outsider_reaches_no_planning_object(outsider: User, tenant: Tenant) -> None:
    _outsider_walks_object_routes(outsider, tenant, PLANNING_MODELS)


@pricing_owned
def test_outsider_reaches_no_private_pricing_record(outsider: User, tenant: Tenant) -> None:
    _outsider_walks_object_routes(outsider, tenant, PRICING_MODELS)


def _listed_ids(response: Any) -> set[object]:
    """The ``id`` of every object an API list returned (paginated or not)."""
    if "json" not in response.get("Content-Type", ""):
        return set()
    data = json.loads(response.content)
    rows = data.get("results", data) if isinstance(data, dict) else data
    return {row.get("id") for row in rows if isinstance(row, dict)}


def _list_routes() -> list[Route]:
    return [route for route in _walked_routes() if not route.parameters]


def _leaks(response: Any, marker: str) -> bool:
    content = b"".join(response.streaming_content) if response.streaming else response.content
    return marker in content.decode(errors="replace").lower()


def _outsider_walks_lists(
    outsider: User, tenant: Tenant, marker: str, models: tuple[type[Model], ...]
) -> None:
    caller = Caller(outsider)
    before = _database()
    failures = []
    for route in _list_routes() + _shared_object_routes():
        url = route.url(tenant.pk_of(Accelerator)) if route.parameters else route.url("")
        response = caller.call(route, "get", url)
        if response.status_code >= 500:
            failures.append(f"GET {url}: {response.status_code}")
        if _leaks(response, marker):
            failures.append(f"GET {url} shows the first organisation's {marker!r} objects")
        kind = KINDS.get(route.collection)
        if kind is not None and kind in models and route.is_api:
            shown = _listed_ids(response) & {tenant.pk_of(kind)}
            if shown:
                failures.append(f"GET {url} lists {kind.__name__} {shown}")
    assert _database() == before
    assert not failures, "\n".join(failures)


def _shared_object_routes() -> list[Route]:
    return [
        route
        for route in _walked_routes()
        if route.parameters and KINDS.get(route.collection) in SHARED_KINDS
    ]


def test_outsider_lists_and_pages_show_no_planning_object(
    outsider: User, outsider_project: Project, tenant: Tenant
) -> None:
    _outsider_walks_lists(outsider, tenant, PLANNER_MARKER, PLANNING_MODELS)


@pricing_owned
def test_outsider_lists_and_pages_show_no_private_pricing_record(
    outsider: User, outsider_project: Project, tenant: Tenant
) -> None:
    _outsider_walks_lists(outsider, tenant, PRICING_MARKER, PRICING_MODELS)


def test_public_routes_name_a_reason() -> None:
    walked = {route.name for route in all_routes()} | {route.template for route in all_routes()}
    stale = [key for key in PUBLIC if key not in walked and not key.startswith("api-v1:")]
    assert not stale, f"PUBLIC names routes that no longer exist: {stale}"
    assert all(reason.strip() for reason in PUBLIC.values())


# --- The admin ------------------------------------------------------------------------------


def _admin_url(model: type[Model], view: str, *args: object) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def test_admin_changelists_show_the_outsider_nothing_of_the_first_organisation(
    outsider: User, tenant: Tenant
) -> None:
    """Every registered model: the changelist is refused (no permission) or leaves the first
    organisation's rows out."""
    client = Client()
    client.force_login(outsider)
    for model in admin.site._registry:
        response = client.get(_admin_url(model, "changelist"))
        assert response.status_code in (200, 403), (model, response.status_code)
        assert not _leaks(response, PLANNER_MARKER), model


@pricing_owned
def test_admin_pricing_pages_hide_the_first_organisations_records(
    outsider: User, tenant: Tenant
) -> None:
    """A staff outsider with the pricing models' permissions: changelists leave the private
    records out; their change, history and delete pages do not open; a delete deletes none."""
    client = Client()
    client.force_login(outsider)
    before = _database()
    for model in PRICING_MODELS:
        changelist = client.get(_admin_url(model, "changelist"))
        assert changelist.status_code == 200, model
        assert not _leaks(changelist, PRICING_MARKER), model
        pk = tenant.pk_of(model)
        for view in ("change", "history", "delete"):
            response = client.get(_admin_url(model, view, pk))
            assert response.status_code in (302, 403, 404), (model, view, response.status_code)
            assert not _leaks(response, PRICING_MARKER), (model, view)
        client.post(_admin_url(model, "delete", pk), {"post": "yes"})
    assert _database() == before
