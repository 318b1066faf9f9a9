"""The settings switch between the embedded default and production by environment alone."""

import os
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_", "REDIS_"))
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_production_settings_pass_check_deploy_without_warnings() -> None:
    result = run_manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        env={
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
            "DATABASE_URL": "postgres://trainplan@db.internal:5432/trainplan",
            "REDIS_URL": "redis://cache.internal:6379/0",
            "DJANGO_ALLOWED_HOSTS": "trainplan.example.com",
        },
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_debug_settings_fail_check_deploy() -> None:
    # The check is able to fail: the embedded development mode is not production-ready.
    result = run_manage("check", "--deploy", "--fail-level", "WARNING", env={"DJANGO_DEBUG": "1"})
    assert result.returncode != 0
    assert "DEBUG" in result.stderr + result.stdout


def test_embedded_default_uses_sqlite_and_eager_tasks() -> None:
    code = (
        "from django.conf import settings as s; "
        "print(s.DATABASES['default']['ENGINE'], s.CELERY_TASK_ALWAYS_EAGER)"
    )
    result = run_manage("shell", "-v", "0", "-c", code, env={})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["django.db.backends.sqlite3", "True"]


def test_service_urls_select_postgresql_and_real_workers() -> None:
    code = (
        "from django.conf import settings as s; "
        "print(s.DATABASES['default']['ENGINE'], s.CELERY_TASK_ALWAYS_EAGER, s.CELERY_BROKER_URL)"
    )
    result = run_manage(
        "shell",
        "-v",
        "0",
        "-c",
        code,
        env={"DATABASE_URL": "postgres://u@h:5432/d", "REDIS_URL": "redis://h:6379/2"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["django.db.backends.postgresql", "False", "redis://h:6379/2"]


def test_the_local_worker_switch_sends_tasks_through_files_in_var(tmp_path: Path) -> None:
    code = (
        "from django.conf import settings as s; "
        "o = s.CELERY_BROKER_TRANSPORT_OPTIONS; "
        "print(s.CELERY_TASK_ALWAYS_EAGER, s.CELERY_BROKER_URL, s.CELERY_RESULT_BACKEND, "
        "o['data_folder_in'] == o['data_folder_out'], o['data_folder_in'])"
    )
    env = {"TRAINPLAN_LOCAL_WORKER": "1", "TRAINPLAN_VAR_DIR": str(tmp_path)}
    result = run_manage("shell", "-v", "0", "-c", code, env=env)
    assert result.returncode == 0, result.stderr
    broker = tmp_path / "broker"
    assert result.stdout.split() == [
        "False",
        "filesystem://localhost/",
        f"file://{broker / 'results'}",
        "True",
        str(broker / "queue"),
    ]
    assert sorted(path.name for path in broker.iterdir()) == ["control", "queue", "results"]


def test_redis_wins_over_the_local_worker_switch(tmp_path: Path) -> None:
    code = "from django.conf import settings as s; print(s.CELERY_BROKER_URL, s.LOCAL_WORKER)"
    env = {
        "TRAINPLAN_LOCAL_WORKER": "1",
        "TRAINPLAN_VAR_DIR": str(tmp_path),
        "REDIS_URL": "redis://h:6379/2",
    }
    result = run_manage("shell", "-v", "0", "-c", code, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["redis://h:6379/2", "False"]
    assert not (tmp_path / "broker").exists()


def test_the_development_mailer_prints_mail_to_the_console() -> None:
    # The SMTP-only options (a timeout) once went to the console backend too, which refused
    # them, so development mail was never shown.
    code = (
        "from django.core.mail import send_mail; "
        "send_mail('Budget submitted', 'Open it', 'a@example.com', ['finn@example.com'])"
    )
    result = run_manage("shell", "-v", "0", "-c", code, env={"DJANGO_DEBUG": "1"})
    assert result.returncode == 0, result.stderr
    assert "Subject: Budget submitted" in result.stdout
    assert "To: finn@example.com" in result.stdout
