"""Time downloading the demo's submitted sign-off pack: rendered live (before) and stored (after).

    [DATABASE_URL=postgres://...] python benchmarks/bench_signoff_pack.py [--repeat 5]

Loads the demo (users, prices, the project and its submitted request; tasks run in this
process) into a throwaway test database (``<name>_bench``, dropped afterwards; SQLite in
memory without ``DATABASE_URL``). "Before" renders the PDF and XLSX as each download used to;
"after" downloads them through the page (login, middleware, the request's edition, the stored
row). Target (issue 33): the stored PDF in < 300 ms; it took 4.7 s rendered on every click.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "trainplan.settings")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.urls import reverse  # noqa: E402

from planner.budgets.models import BudgetRequest, SignoffPack  # noqa: E402
from planner.budgets.signoff import signoff_pdf, signoff_xlsx  # noqa: E402
from planner.demo import demo_users_load  # noqa: E402
from planner.demo_project import DEMO_PROJECT, planner_demo_load  # noqa: E402
from pricing.demo import pricing_demo_load  # noqa: E402
from trainplan.celery import app as celery_app  # noqa: E402

TARGET_S = 0.3


def median_s(action: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def demo_request() -> BudgetRequest:
    """The demo's submitted request, its pack rendered by its task at submission."""
    celery_app.conf.task_always_eager = True
    demo_users_load()
    pricing_demo_load()
    planner_demo_load()
    return BudgetRequest.objects.get(project__name=DEMO_PROJECT)


def downloader(request: BudgetRequest, name: str) -> Callable[[], bytes]:
    client = Client()
    client.force_login(request.created_by)
    url = reverse(f"planner:{name}", args=[request.pk])

    def download() -> bytes:
        response = client.get(url)
        assert response.status_code == 200, response.status_code
        return bytes(response.content)

    return download


def check_stored(request: BudgetRequest, pdf: bytes) -> tuple[SignoffPack, int]:
    """The download is the stored file, rendered once, from the request's snapshot; the
    stored row and the PDF's number of pages."""
    from pypdf import PdfReader

    pack = SignoffPack.objects.get(request=request)
    assert pdf == bytes(pack.pdf or b""), "the download is not the stored file"
    assert pack.renders == 1, f"rendered {pack.renders} times"
    assert pack.snapshot_sha256 == request.snapshot_sha256
    pages = PdfReader(io.BytesIO(pdf)).pages
    text = "".join(page.extract_text() for page in pages)
    assert request.snapshot_sha256 in "".join(text.split()), "the PDF lacks the snapshot hash"
    return pack, len(pages)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    # The test client speaks plain HTTP to "testserver", as the tests' settings allow.
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    settings.SECURE_SSL_REDIRECT = False
    if connection.vendor != "sqlite":
        connection.settings_dict["TEST"]["NAME"] = f"{connection.settings_dict['NAME']}_bench"
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        request = demo_request()
        pdf_download, xlsx_download = (
            downloader(request, "budget-pdf"),
            downloader(request, "budget-xlsx"),
        )
        live_pdf = median_s(lambda: signoff_pdf(request), args.repeat)
        live_xlsx = median_s(lambda: signoff_xlsx(request), args.repeat)
        stored_pdf = median_s(pdf_download, args.repeat)
        stored_xlsx = median_s(xlsx_download, args.repeat)
        pdf = pdf_download()
        pack, pages = check_stored(request, pdf)
        print(f"sign-off pack of the demo request ({pages} pages, {len(pdf):,} B PDF, "
              f"{connection.vendor}, "
              f"median of {args.repeat}; rendered once at submission in "
              f"{pack.render_seconds:.2f} s):")  # fmt: skip
        print(f"  PDF  before (live render) {live_pdf:.3f} s, after (stored) {stored_pdf:.3f} s "
              f"(target < {TARGET_S:g} s), {live_pdf / stored_pdf:.0f}x")  # fmt: skip
        print(f"  XLSX before (live render) {live_xlsx:.3f} s, after (stored) "
              f"{stored_xlsx:.3f} s, {live_xlsx / stored_xlsx:.0f}x")  # fmt: skip
        print(f"  snapshot SHA-256 {request.snapshot_sha256} (the PDF's and the row's match); "
              f"PDF SHA-256 {hashlib.sha256(pdf).hexdigest()[:16]}…")  # fmt: skip
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
