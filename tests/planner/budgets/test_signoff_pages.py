"""The sign-off PDF's pages: no heading is left at the foot of a page without what it heads.

WeasyPrint lays the pack out; each heading (``h2``, ``h3``) must begin on the page where the
first block it introduces (the one after its note, if it has a ``p.helptext``) begins. The
demo's request once ended page 3 with "The whole bill beyond accelerator-hours" and its note,
the table on page 4.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from django.template.loader import render_to_string

from planner.budgets.models import BudgetRequest
from planner.budgets.signoff.context import signoff_pack_context
from planner.demo import demo_users_load
from planner.demo_project import DEMO_PROJECT, planner_demo_load
from pricing.demo import pricing_demo_load

# The demo starts its runs on commit and reads their figures back: real transactions.
pytestmark = pytest.mark.django_db(transaction=True)

HEADINGS = ("h2", "h3")


@pytest.fixture
def demo_request(eager_tasks: None) -> BudgetRequest:
    demo_users_load()
    pricing_demo_load()
    planner_demo_load()
    return BudgetRequest.objects.get(project__name=DEMO_PROJECT)


def _first_pages(request: BudgetRequest) -> tuple[ET.Element, dict[int, int], int]:
    """The pack's HTML tree, the page (from 0) where each element's first box lies, keyed by
    the element's id(), and the number of pages."""
    from weasyprint import HTML  # as the renderer does: its system libraries load on import

    html = render_to_string("budgets/signoff_pdf.html", signoff_pack_context(request))
    document = HTML(string=html).render()
    first: dict[int, int] = {}
    root = None
    for number, page in enumerate(document.pages):
        for box in page._page_box.descendants():
            element = getattr(box, "element", None)
            if element is not None:
                first.setdefault(id(element), number)
                if element.tag == "html":
                    root = element
    assert root is not None
    return root, first, len(document.pages)


def _is_note(element: ET.Element) -> bool:
    return element.tag == "p" and "helptext" in (element.get("class") or "").split()


def _headed_block(parent: ET.Element, heading: ET.Element) -> ET.Element | None:
    """The first sibling after ``heading`` that is neither a heading nor a note."""
    siblings = list(parent)
    following = siblings[siblings.index(heading) + 1 :]
    return next((e for e in following if e.tag not in HEADINGS and not _is_note(e)), None)


def test_every_heading_begins_on_the_page_of_the_block_it_heads(
    demo_request: BudgetRequest,
) -> None:
    root, first, pages = _first_pages(demo_request)
    assert pages > 3  # a pack long enough to break
    checked, orphans = 0, []
    for parent in root.iter():
        for heading in (child for child in parent if child.tag in HEADINGS):
            block = _headed_block(parent, heading)
            if block is None or id(heading) not in first or id(block) not in first:
                continue
            checked += 1
            if first[id(block)] != first[id(heading)]:
                text = "".join(heading.itertext()).strip()
                orphans.append(f"{text!r} on page {first[id(heading)] + 1}")
    assert checked >= 10
    assert orphans == []
