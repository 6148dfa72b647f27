# agentledger: `make run` runs the main job end to end, `make test` runs the tests.
# Both install what they need first (pip, into $(PYTHON); bubblewrap, the sandbox of
# subprocess tools and command checks, with apt-get when it is missing). Every tool
# runs through $(PYTHON) -m, so `make run PYTHON=venv/bin/python` works without
# activating the venv.
PYTHON ?= python3
AGENTLEDGER := $(PYTHON) -m services.entrypoints.cli.main
STAMP := .agentledger/.installed

.PHONY: install sandbox run test test-unit test-integration test-e2e lint schemas bench bench-quick bench-claude bench-smoke chaos clean

$(STAMP): pyproject.toml
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@mkdir -p .agentledger && touch $(STAMP)

install: $(STAMP)

# bwrap (bubblewrap) and prlimit (util-linux) must be on PATH unless AGENTLEDGER_SANDBOX=off.
# Idempotent: nothing happens when bwrap is there; as root with apt-get it is installed.
sandbox:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get install -y -q bubblewrap >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null && apt-get install -y -q bubblewrap >/dev/null; }; \
	  else \
	    echo "bubblewrap is missing: sudo apt-get install -y bubblewrap (or set AGENTLEDGER_SANDBOX=off)" >&2; exit 1; \
	  fi; }
	@command -v bwrap >/dev/null && command -v prlimit >/dev/null

run: install sandbox
	$(AGENTLEDGER) run examples/inventory/spec.yaml

test: install sandbox
	$(PYTHON) -m pytest -q tests

test-unit: install
	$(PYTHON) -m pytest tests/unit

test-integration: install sandbox
	$(PYTHON) -m pytest tests/integration

test-e2e: install sandbox
	$(PYTHON) -m pytest tests/e2e

lint: install
	$(PYTHON) -m ruff check .
	$(PYTHON) -c "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
	$(PYTHON) -m mypy events schemas

schemas: install
	$(PYTHON) -m schemas.export

BENCH_STAMP := .agentledger/.bench-installed

# the peers the bench runs beside agentledger (the `bench` extra)
$(BENCH_STAMP): pyproject.toml $(STAMP)
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -e '.[dev,bench]'
	@touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(PYTHON) -m tests.bench

bench-quick: $(BENCH_STAMP)
	$(PYTHON) -m tests.bench --quick

bench-claude: install
	$(PYTHON) -m tests.bench.claude_view

bench-smoke: install
	$(PYTHON) -m pytest tests/integration/test_bench_smoke.py

# fault injection on private redis-servers (never the shared one): figures, exit 1 on a failed zero
chaos: install
	$(PYTHON) -m tests.chaos $(CHAOS_ARGS)

clean:
	rm -rf .agentledger build *.egg-info
