# The README's commands.  `make test` builds .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: test check lint typecheck pytest bench clean

test: check pytest

$(BIN)/pytest: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

check: lint typecheck

lint: $(BIN)/pytest
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(BIN)/pytest
	$(BIN)/mypy src

pytest: $(BIN)/pytest
	$(BIN)/pytest

# The quick benchmark matrix (docs/benchmarks.md), in .venv with the `bench` extra.
# wrk is installed with apt-get when it is missing and we are root on Debian/Ubuntu.
# More: make bench BENCH_ARGS='--full'
BENCH_ARGS ?=

bench: $(VENV)/.bench-installed
	@command -v wrk >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && [ -f /etc/debian_version ]; then \
	    apt-get update -qq && apt-get install -y -qq wrk; \
	  else \
	    echo "make bench needs wrk: sudo apt-get install wrk (Debian, Ubuntu) or brew install wrk" >&2; \
	    exit 1; \
	  fi; }
	$(BIN)/python -m boundlog.bench $(BENCH_ARGS)

$(VENV)/.bench-installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[bench]'
	touch $@

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
