# TrainPlan. `make run` sets everything up and serves the app; `make test` runs every test.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
DEV_ENV := DJANGO_DEBUG=1

.PHONY: run install migrate demo test test-embedded lint accuracy bench clean

run: install migrate demo  ## set up, load demo data, serve on http://127.0.0.1:8000 with a worker
	$(DEV_ENV) $(PY) scripts/serve.py 127.0.0.1:8000

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@python=$$(scripts/find-python.sh) || exit 1; \
	echo "Using $$python"; \
	[ -x $(PY) ] || "$$python" -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $@

migrate: install
	$(DEV_ENV) $(PY) manage.py migrate --noinput

demo: install
	$(DEV_ENV) $(PY) manage.py load_demo

test: install  ## the whole suite: PostgreSQL + Redis + a real worker when they answer
	$(PY) scripts/run_tests.py $(PYTEST_ARGS)

test-embedded: install  ## the whole suite on SQLite with eager Celery
	TRAINPLAN_TEST_EMBEDDED=1 $(PY) scripts/run_tests.py $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy .

accuracy: install  ## refit every family, cross-validate by source, rewrite docs/accuracy.md
	$(PY) -m estimator calibrate

bench: install  ## print the estimator's speed figures
	$(PY) benchmarks/bench_estimator.py
	$(PY) benchmarks/bench_search.py

clean:
	rm -rf $(VENV) var staticfiles *.egg-info
