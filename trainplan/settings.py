"""TrainPlan settings, read from the environment.

With nothing set, the app runs on the embedded default: SQLite in ``var/`` and Celery
tasks executed in-process (eager). Setting ``DATABASE_URL`` and ``REDIS_URL`` switches to
PostgreSQL, Redis and real Celery workers. See README.md, "Production".
"""

from __future__ import annotations

import ipaddress
import warnings
from datetime import timedelta
from pathlib import Path
from typing import cast

import environ
from django.utils.csp import CSP

from trainplan.env import env_bool, env_int, env_list, env_secret, env_str, local_secret_key

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("TRAINPLAN_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DJANGO_DEBUG", default=False)
SECRET_KEY = env_secret("DJANGO_SECRET_KEY") or local_secret_key(VAR_DIR / "secret_key")
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    # API tokens, stored hashed, with an expiry (REST_KNOX below). rest_framework.authtoken is
    # gone: its table (authtoken_token, tokens in clear) stays until dropped by hand.
    "knox",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "organisations",
    "pricing",
    "planner",
]

MIDDLEWARE = [
    # /livez answers before anything else: no host check, no https redirect, no session.
    "trainplan.health.LivenessMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Sends SECURE_CSP on every answer, static files included (WhiteNoise answers below it).
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # A view that loses the database answers 503, not 500 (lib.http).
    "lib.http.DatabaseOutageMiddleware",
]

ROOT_URLCONF = "trainplan.urls"
WSGI_APPLICATION = "trainplan.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "planner.budgets.context_processors.inbox_counts",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------
DATABASE_URL = env_str("DATABASE_URL")
EMBEDDED = not DATABASE_URL
if EMBEDDED:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": VAR_DIR / "trainplan.sqlite3",
            # Wait for a lock rather than fail, and take the write lock when a transaction
            # starts: concurrent writers queue instead of answering "database is locked".
            # Write-ahead logging lets the web server read while a worker writes.
            "OPTIONS": {
                "timeout": 20,
                "transaction_mode": "IMMEDIATE",
                "init_command": "PRAGMA journal_mode=WAL;",
            },
        }
    }
else:
    DATABASES = {"default": environ.Env.db_url_config(DATABASE_URL)}
    DATABASES["default"]["CONN_MAX_AGE"] = env_int("DJANGO_CONN_MAX_AGE", 60)
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    # A database that accepts connections and never answers must not hold a request until
    # gunicorn kills it: a connection gives up after DJANGO_DB_CONNECT_TIMEOUT_S (libpq's
    # minimum is 2 s) and the request answers 503 database_unavailable (lib.http); a
    # statement the server has run for DJANGO_DB_STATEMENT_TIMEOUT_MS is cancelled (0: none).
    DATABASES["default"]["OPTIONS"] = {
        **cast(dict[str, object], DATABASES["default"].get("OPTIONS") or {}),
        "connect_timeout": env_int("DJANGO_DB_CONNECT_TIMEOUT_S", 2),
        "options": f"-c statement_timeout={env_int('DJANGO_DB_STATEMENT_TIMEOUT_MS', 30000)}",
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Celery and cache -----------------------------------------------------------------
REDIS_URL = env_str("REDIS_URL")
# Without Redis, tasks run in the web process (eager) unless TRAINPLAN_LOCAL_WORKER is set:
# `make run` sets it and starts a real worker (and beat) beside the web server, on a broker
# kept in files under var/broker (kombu's filesystem transport), so nothing else has to run.
LOCAL_WORKER = not REDIS_URL and env_bool("TRAINPLAN_LOCAL_WORKER")
BROKER_DIR = VAR_DIR / "broker"
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL and not LOCAL_WORKER
CELERY_TASK_EAGER_PROPAGATES = True
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_RESULT_BACKEND: str | None = REDIS_URL
elif LOCAL_WORKER:
    for _folder in ("queue", "control", "results"):
        (BROKER_DIR / _folder).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = "filesystem://localhost/"
    CELERY_RESULT_BACKEND = f"file://{BROKER_DIR / 'results'}"
else:
    CELERY_BROKER_URL = "memory://"
    CELERY_RESULT_BACKEND = None
# Runs and notifications keep their state in the database, so their tasks store no result:
# sending one never touches the result store (only `ping` asks for its result).
CELERY_TASK_IGNORE_RESULT = True
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
# A worker that dies mid-task leaves the message unacknowledged, so another worker redoes it.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 300)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 360)
CELERY_RESULT_EXPIRES = 3600
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Redis re-delivers an unacknowledged task after this long; it must exceed the time limit.
# Workers sweep for such tasks every interval x throttle seconds (kombu's defaults: 10 x 10).
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {
    "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", CELERY_TASK_TIME_LIMIT + 60),
    "unacked_restore_interval": env_int("CELERY_UNACKED_RESTORE_INTERVAL", 10),
    "unacked_restore_throttle": env_int("CELERY_UNACKED_RESTORE_THROTTLE", 10),
}
if LOCAL_WORKER:
    # One folder is both ends of the queue; the worker looks for new files this often [s].
    CELERY_BROKER_TRANSPORT_OPTIONS.update(
        data_folder_in=str(BROKER_DIR / "queue"),
        data_folder_out=str(BROKER_DIR / "queue"),
        control_folder=str(BROKER_DIR / "control"),
        polling_interval=0.2,
    )
# The outbox: a run or an e-mail is saved with the change and sent to the broker on commit;
# `celery -A trainplan beat` runs the dispatcher, which sends what the broker missed (it was
# down) and queues again a run whose worker stopped beating, up to RUN_MAX_ATTEMPTS times.
DISPATCH_INTERVAL_S = env_int("TRAINPLAN_DISPATCH_INTERVAL_S", 30)
RUN_HEARTBEAT_S = env_int("TRAINPLAN_RUN_HEARTBEAT_S", 10)
RUN_STALE_AFTER_S = env_int("TRAINPLAN_RUN_STALE_AFTER_S", 60)
RUN_MAX_ATTEMPTS = env_int("TRAINPLAN_RUN_MAX_ATTEMPTS", 3)
# A job sent this long ago that no worker took while the broker's queue is empty lost its
# message (a flushed or failed-over Redis): the dispatcher sends it again.
JOB_UNCLAIMED_AFTER_S = env_int("TRAINPLAN_JOB_UNCLAIMED_AFTER_S", 60)
CELERY_BEAT_SCHEDULE = {
    "dispatch-pending": {"task": "planner.dispatch_pending", "schedule": DISPATCH_INTERVAL_S},
    # Expired API tokens are refused already; this removes their rows once a day.
    "tokens-expired-delete": {"task": "planner.tokens_expired_delete", "schedule": 24 * 3600},
}

if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            # Login counters live here: a Redis that is down must not hold up a login.
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        },
        # Where the login counters go while Redis is down or hangs (lib.cacheguard): a
        # table in the database (migration planner 0010), so the lockout holds.
        "login_fallback": {
            "BACKEND": "django.core.cache.backends.db.DatabaseCache",
            "LOCATION": "trainplan_login_fallback",
        },
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# --- Auth -----------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "home"
# Failed logins (the login page and the API's token endpoint alike, counted in the cache):
# this many for one user name, or from one address, lock it out for LOGIN_LOCKOUT_MINUTES.
LOGIN_MAX_FAILURES_PER_USERNAME = env_int("TRAINPLAN_LOGIN_MAX_FAILURES_PER_USERNAME", 5)
LOGIN_MAX_FAILURES_PER_ADDRESS = env_int("TRAINPLAN_LOGIN_MAX_FAILURES_PER_ADDRESS", 20)
LOGIN_LOCKOUT_MINUTES = env_int("TRAINPLAN_LOGIN_LOCKOUT_MINUTES", 15)
# API tokens (knox): valid this long, at most this many unexpired ones per user.
REST_KNOX = {
    "TOKEN_TTL": timedelta(hours=env_int("TRAINPLAN_TOKEN_TTL_HOURS", 720)),
    "TOKEN_LIMIT_PER_USER": env_int("TRAINPLAN_TOKENS_PER_USER", 10),
    "AUTH_HEADER_PREFIX": "Token",
}

# --- Internationalisation -------------------------------------------------------------
LANGUAGE_CODE = "en-gb"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# --- Static files ---------------------------------------------------------------------
STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# Serve straight from the app folders when nobody ran collectstatic (embedded default, tests).
WHITENOISE_USE_FINDERS = env_bool("WHITENOISE_USE_FINDERS", default=True)
# Until `collectstatic` has run, STATIC_ROOT does not exist; the finders serve the files then.
warnings.filterwarnings("ignore", message="No directory at", module="whitenoise.base")

# --- API ------------------------------------------------------------------------------
REST_FRAMEWORK = {
    # Token first: DRF answers an anonymous call 401 with `WWW-Authenticate: Token` when the
    # first class names a scheme. Sessions serve the browsable API, with their CSRF checks.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "planner.accounts.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # DRF's parsers, with JSON nested too deeply for Python answered 400 instead of 500.
    "DEFAULT_PARSER_CLASSES": [
        "planner.common.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    # Requests to the token endpoint per client address; the lockout (LOGIN_*) comes on top.
    "DEFAULT_THROTTLE_RATES": {"login": env_str("TRAINPLAN_LOGIN_RATE", "10/min")},
    # The client address is REMOTE_ADDR, or, behind this many proxies, the address they name
    # in X-Forwarded-For (0: the header is ignored, so callers cannot pick their address).
    "NUM_PROXIES": env_int("TRAINPLAN_NUM_PROXIES", 0),
    # Both apps' domain errors answer 400/403/409 with the field at fault (lib.api).
    "EXCEPTION_HANDLER": "lib.api.exception_handler",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "TrainPlan API",
    "DESCRIPTION": "Plan the time and cost of training large language models.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Several models have a "status" with different choices: name each set.
    "ENUM_NAME_OVERRIDES": {
        "RunStatusEnum": "planner.scenarios.models.RunStatus",
        "CapacityPlanStatusEnum": "planner.capacity.models.PlanStatus",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        # Every operation's error answers (lib.api.ERROR_RESPONSES).
        "lib.api.error_responses_hook",
    ],
}

# --- Email ----------------------------------------------------------------------------
# Development prints mail to the console; production sends it over SMTP.
EMAIL_BACKEND_PATH = env_str(
    "DJANGO_EMAIL_BACKEND",
    "django.core.mail.backends.console.EmailBackend"
    if DEBUG
    else "django.core.mail.backends.smtp.EmailBackend",
)
EMAIL_SMTP = EMAIL_BACKEND_PATH.endswith("smtp.EmailBackend")
MAILERS = {
    "default": {
        "BACKEND": EMAIL_BACKEND_PATH,
        "OPTIONS": {
            key: value
            for key, value in (
                ("host", env_str("DJANGO_EMAIL_HOST")),
                ("port", env_int("DJANGO_EMAIL_PORT", 0)),
                ("username", env_str("DJANGO_EMAIL_USER")),
                ("password", env_secret("DJANGO_EMAIL_PASSWORD")),
                ("use_tls", env_bool("DJANGO_EMAIL_USE_TLS", default=False)),
                # A mail server that accepts and then stalls must not hold a worker forever.
                ("timeout", env_int("DJANGO_EMAIL_TIMEOUT", 10)),
            )
            # The SMTP options mean something only to the SMTP backend; the console and
            # in-memory backends refuse options they do not know.
            if value and EMAIL_SMTP
        },
    }
}
DEFAULT_FROM_EMAIL = env_str("DJANGO_DEFAULT_FROM_EMAIL", "TrainPlan <trainplan@localhost>")
# A notification the mail server refused is tried again after 5 s, then twice as long each
# time up to 10 min, for 24 h after it was written; then it is marked failed. Beat's
# dispatcher sends again one whose retry is overdue by NOTIFICATION_OVERDUE_S (its retry
# message was lost).
EMAIL_RETRY_FIRST_S = env_int("TRAINPLAN_EMAIL_RETRY_FIRST_S", 5)
EMAIL_RETRY_MAX_S = env_int("TRAINPLAN_EMAIL_RETRY_MAX_S", 600)
EMAIL_RETRY_HOURS = env_int("TRAINPLAN_EMAIL_RETRY_HOURS", 24)
NOTIFICATION_OVERDUE_S = env_int("TRAINPLAN_NOTIFICATION_OVERDUE_S", 60)
# Where TrainPlan is reached from outside, for absolute links in e-mail (no trailing slash).
SITE_URL = env_str("TRAINPLAN_SITE_URL", "http://127.0.0.1:8000").rstrip("/")
# A price book fetched longer ago than this is stale: budgets resting on it say so.
PRICE_BOOK_STALE_DAYS = env_int("TRAINPLAN_PRICE_BOOK_STALE_DAYS", 90)

# --- Security (production) ------------------------------------------------------------
# Secure by default; the embedded default turns these off through DJANGO_DEBUG=1.
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", default=not DEBUG)
SESSION_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", default=not DEBUG)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 0 if DEBUG else 31_536_000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", default=True)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", default=True)
if env_bool("DJANGO_BEHIND_TLS_PROXY", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Load balancers and orchestrators probe health over plain http.
SECURE_REDIRECT_EXEMPT = [r"^livez$", r"^readyz$", r"^healthz$"]
X_FRAME_OPTIONS = "DENY"
# Pages run only the scripts and styles served from static/: no inline <script>, no style=""
# attributes, no CDN. JSON handed to scripts sits in <script type="application/json">
# (json_script), which the browser never executes. Chart.js styles its canvas through the
# CSSOM, which style-src does not govern.
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:"],
    "font-src": [CSP.SELF],
    "connect-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.SELF],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}

# --- Health ---------------------------------------------------------------------------
# Callers from these networks (CIDR) see which service is down on /readyz; others, unless
# staff, get the status alone. Parsed here so a typo fails at start-up.
HEALTH_NETWORKS = [
    str(ipaddress.ip_network(network, strict=False))
    for network in env_list("TRAINPLAN_HEALTH_NETWORKS", ["127.0.0.0/8", "::1/128"])
]

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("DJANGO_LOG_LEVEL", "INFO")},
}
