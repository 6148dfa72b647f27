# agentledger: `make run` runs the main job end to end, `make test` runs the tests.
# Both install what they need first (pip, into $(PYTHON)); every tool runs through
# $(PYTHON) -m, so `make run PYTHON=venv/bin/python` works without activating the venv.
PYTHON ?= python3
AGENTLEDGER := $(PYTHON) -m services.entrypoints.cli.main
STAMP := .agentledger/.installed

.PHONY: install run test test-unit test-integration test-e2e lint schemas bench bench-quick bench-smoke clean

$(STAMP): pyproject.toml
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@mkdir -p .agentledger && touch $(STAMP)

install: $(STAMP)

run: install
	$(AGENTLEDGER) run examples/inventory/spec.yaml

test: install
	$(PYTHON) -m pytest -q tests

test-unit: install
	$(PYTHON) -m pytest tests/unit

test-integration: install
	$(PYTHON) -m pytest tests/integration

test-e2e: install
	$(PYTHON) -m pytest tests/e2e

lint: install
	$(PYTHON) -m ruff check .
	$(PYTHON) -c "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
	$(PYTHON) -m mypy events schemas

schemas: install
	$(PYTHON) -m schemas.export

bench: install
	$(PYTHON) -m tests.bench

bench-quick: install
	$(PYTHON) -m tests.bench --quick

bench-smoke: install
	$(PYTHON) -m pytest tests/integration/test_bench_smoke.py

clean:
	rm -rf .agentledger build *.egg-info
