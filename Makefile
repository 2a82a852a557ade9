# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
OUT     ?= out/demo

.PHONY: install browser demo test test-nojit test-fast test-pythons lint typecheck bench bench-quick clean

RUNTIME := $(VENV)/.runtime

# `make demo` needs the runtime dependencies only; `make test` adds the test and lint extras.
$(RUNTIME): pyproject.toml
	@echo "== creating $(VENV) and installing tilesim with its runtime dependencies (numpy, numba, ...; a few minutes the first time)"
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e .
	touch $(RUNTIME)

$(STAMP): $(RUNTIME)
	@echo "== adding the test and lint tools to $(VENV) (pytest, hypothesis, selenium, ruff, mypy, ...)"
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# `tilesim demo`: the SHD-shaped 2-layer paper network (700-1462-1460-20, B=48, T=100, 5 % caps) trained
# for a few steps on a simulated GC200 (its options: DEMO_OPTIONS in models/snn/commands/cli.py); writes
# report.html, summary.json, trace.json and the pictures into $(OUT).
demo: $(RUNTIME)
	$(BIN)/tilesim demo --out $(OUT)

# Debian's chromium and its driver, for the report pages' browser tests (tests/test_report_page.py).
# Opt-in: `make test` never installs system packages; without them the browser tests skip with one line.
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  $$SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver; }

# The suite on every core (pytest-xdist), then the no-JIT leg.
JOBS ?= auto
test: $(STAMP) lint
	$(BIN)/python -m pytest -q -n $(JOBS)
	$(MAKE) --no-print-directory test-nojit

# The kernels and the engine as plain Python (NUMBA_DISABLE_JIT=1): the code Numba compiles is also
# the code a debugger steps through, and both must agree with the NumPy twins.
NOJIT_TESTS := tests/test_snn_kernels.py tests/test_snn_reference.py tests/test_snn_network.py \
	tests/test_linear_blocksparse.py tests/test_engine.py tests/test_fabric.py tests/test_workload_seam.py
test-nojit: $(STAMP)
	NUMBA_DISABLE_JIT=1 $(BIN)/python -m pytest -q -p no:cacheprovider $(NOJIT_TESTS)

# Style and types: ruff's lint and format checks over the tree, mypy over the core and tilesim.mapping.
lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(MAKE) --no-print-directory typecheck

# mypy cannot follow pyproject's package-dir (the models/ and mapping/ folders are tilesim.models and
# tilesim.mapping), so it reads the sources through a tree of links laid out as installed; `mypy tilesim
# mapping` from here would see tilesim.mapping's imports as Any. Errors name build/typecheck/tilesim/... paths.
TYPECHECK := build/typecheck
typecheck: $(STAMP)
	rm -rf $(TYPECHECK) && mkdir -p $(TYPECHECK)/tilesim
	for f in tilesim/*; do ln -s $(CURDIR)/$$f $(TYPECHECK)/tilesim/; done
	ln -s $(CURDIR)/models $(TYPECHECK)/tilesim/models && ln -s $(CURDIR)/mapping $(TYPECHECK)/tilesim/mapping
	cd $(TYPECHECK) && $(abspath $(BIN))/mypy --config-file $(CURDIR)/pyproject.toml --exclude '^tilesim/models/' tilesim

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -n $(JOBS) -m "not slow"

# The oldest and the newest supported Python, each in its own venv (CI runs this too); any other
# interpreter with `make test PY=python3.12 VENV=.venv-3.12`, or all of them with `nox -s tests`.
OLDEST  ?= 3.10
NEWEST  ?= 3.13
test-pythons:
	@for v in $(OLDEST) $(NEWEST); do \
	  py=$$(ls -d $$HOME/.pyenv/versions/$$v*/bin/python$$v 2>/dev/null | tail -1); \
	  [ -n "$$py" ] || py=$$(command -v python$$v 2>/dev/null); \
	  if [ -z "$$py" ] || ! $$py --version >/dev/null 2>&1; then \
	    echo "python$$v not found: install it (e.g. pyenv install $$v)"; exit 2; fi; \
	  echo "== Python $$v ($$py)"; $(MAKE) --no-print-directory test PY=$$py VENV=.venv-$$v || exit 1; \
	done

# The benchmarks (benchmarks/bench_*.py, each run from the checkout as `python benchmarks/bench_X.py`), each
# checked against its own targets: all of them run, then the ones that failed a target (or did not run) are named
# and the target fails. The full set takes 7.5 min on a quiet 2-core machine (about 15 at load 5); `make bench-quick`
# runs each with --quick (smaller sizes, one round) in 2 min (about 6 at load 5).
BENCH_FLAGS ?=
bench: $(STAMP)
	@failed=""; for b in benchmarks/bench_*.py; do \
	  echo "== $$b $(BENCH_FLAGS)"; start=$$(date +%s); \
	  $(BIN)/python $$b $(BENCH_FLAGS) || failed="$$failed $$b"; \
	  echo "== $$b: $$(( $$(date +%s) - start )) s"; \
	done; \
	if [ -n "$$failed" ]; then echo "== failed:$$failed"; exit 1; fi; echo "== every benchmark met its targets"

bench-quick: $(STAMP)
	@$(MAKE) --no-print-directory bench BENCH_FLAGS=--quick

clean:
	rm -rf $(VENV) .venv-3.* out .pytest_cache .nox
