# The two commands of the README: `make demo` and `make test`. Both create .venv on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev
export OMP_NUM_THREADS := 1
export NUMBA_NUM_THREADS := 1
# pip byte-compiles every installed file, one at a time: half of a fresh install (about 45 of 95 s here). Installing
# with --no-compile and compiling once on every core, leaving out the packages' own test suites (a quarter of the
# source, never imported), took 26 s; without compiled files, each process would compile torch anew at import where
# PYTHONDONTWRITEBYTECODE is set (11.9 s against 4.7 s for the imports of a reproduction). compile_dir's answer is
# not checked, as pip does not check its own: a file in torch uses Python 3.12 syntax and never compiles on 3.11.
COMPILE = $(BIN)/python -c "import compileall, re; compileall.compile_dir('$(VENV)/lib', quiet=2, workers=0, \
	rx=re.compile('/tests?/'))"
PIP_INSTALL = $(BIN)/pip install -q --no-compile -c constraints.txt

.PHONY: demo test lint bench setup browser clean

setup: $(DEV_STAMP)

# The demo needs only what dcplace runs with; the tests and linters add the dev extras. (Not the `.installed` of older
# commits, which meant the dev extras too: an older commit's `make test` in a venv the demo made installs them.)
$(STAMP): pyproject.toml constraints.txt
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(PIP_INSTALL) -e .
	$(COMPILE)
	touch $(STAMP)

$(DEV_STAMP): $(STAMP)
	$(PIP_INSTALL) -e ".[dev]"
	$(COMPILE)
	touch $(DEV_STAMP)

demo: $(STAMP)
	$(BIN)/dcplace demo

# The browser tests (the report, the service's /docs) need Debian's chromium: installed here when missing and this
# is root on Debian; otherwise those tests are skipped, and this says so.
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	    (apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium) >/dev/null 2>&1; } || \
	  echo "make: no chromium (apt-get install chromium): the browser tests will be skipped"

test: $(DEV_STAMP) browser
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/ruff format --check src tests benchmarks scripts
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/pytest -n auto

lint: $(DEV_STAMP)
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/mypy
	$(BIN)/lint-imports

bench: $(DEV_STAMP)
	$(BIN)/python benchmarks/bench_numa_throughput.py

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
