# The two commands of the README: `make demo` and `make test`. Both create .venv on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export OMP_NUM_THREADS := 1
export NUMBA_NUM_THREADS := 1

.PHONY: demo test lint bench setup browser clean

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/dcplace demo

# The browser tests (the report, the service's /docs) need Debian's chromium: installed here when missing and this
# is root on Debian; otherwise those tests are skipped, and this says so.
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	    (apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium) >/dev/null 2>&1; } || \
	  echo "make: no chromium (apt-get install chromium): the browser tests will be skipped"

test: $(STAMP) browser
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/ruff format --check src tests benchmarks scripts
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/pytest -n auto

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/mypy
	$(BIN)/lint-imports

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_numa_throughput.py

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
