# agentledger: `make run` runs the main job end to end, `make test` runs the tests.
# Both install what they need first (pip, into the current Python).
PYTHON ?= python3
STAMP := .agentledger/.installed

.PHONY: install run test test-unit test-integration test-e2e lint schemas bench bench-quick bench-claude bench-smoke clean

$(STAMP): pyproject.toml
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@mkdir -p .agentledger && touch $(STAMP)

install: $(STAMP)

run: install
	agentledger run examples/inventory/spec.yaml

test: install
	$(PYTHON) -m pytest -q tests

test-unit: install
	$(PYTHON) -m pytest tests/unit

test-integration: install
	$(PYTHON) -m pytest tests/integration

test-e2e: install
	$(PYTHON) -m pytest tests/e2e

lint: install
	ruff check .
	lint-imports
	mypy events schemas

schemas: install
	$(PYTHON) -m schemas.export

bench: install
	$(PYTHON) -m tests.bench

bench-quick: install
	$(PYTHON) -m tests.bench --quick

bench-claude: install
	$(PYTHON) -m tests.bench.claude_view

bench-smoke: install
	$(PYTHON) -m pytest tests/integration/test_bench_smoke.py

clean:
	rm -rf .agentledger build *.egg-info
