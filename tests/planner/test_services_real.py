"""The real services: PostgreSQL stores and returns data, a Celery worker answers via Redis."""

import pytest
from django.contrib.auth.models import Group
from django.db import connection

from planner.tasks import ping

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.postgres
def test_postgresql_saves_and_reads_back() -> None:
    assert connection.vendor == "postgresql"
    Group.objects.create(name="Δ infrastructure ✓")
    connection.close()  # read back over a new connection, not from any cache
    assert Group.objects.get(name="Δ infrastructure ✓").name == "Δ infrastructure ✓"
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_database()")
        assert cursor.fetchone()[0].startswith("test_")


@pytest.mark.redis
@pytest.mark.postgres
def test_real_worker_runs_a_task_through_redis(celery_worker: object) -> None:
    result = ping.delay()
    assert result.get(timeout=30) == "pong"
    assert result.successful()
    assert result.backend.__class__.__name__ == "RedisBackend"
