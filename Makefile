# The README's commands.  `make test` builds .venv on first use.
# Another Python gets its own venv, named after its version, so that it does not clobber
# .venv: `make test PYTHON=python3.12` builds and uses .venv-3.12 (.venv-3.13t for a
# free-threaded 3.13).  VENV=dir picks the directory yourself.
PYTHON ?= python3
PY_VERSION := $(shell $(PYTHON) -c 'import sys; print("%d.%d%s" % (*sys.version_info[:2], sys.abiflags))' 2>/dev/null)
ifeq ($(PY_VERSION),)
$(error PYTHON=$(PYTHON) does not run)
endif
ifeq ($(PYTHON),python3)
VENV ?= .venv
else
VENV ?= .venv-$(PY_VERSION)
endif
BIN := $(VENV)/bin
# A free-threaded build (3.13t) cannot install all of the test extra, nor the linters:
# it gets tests/requirements-free-threaded.txt, which says what it leaves out and why.
ifeq ($(filter %t,$(PY_VERSION)),)
INSTALL := -e '.[test,dev,docs]'
else
INSTALL := -e . -r tests/requirements-free-threaded.txt
endif

.PHONY: test check lint typecheck csrc-check pytest pytest-pure pytest-not-asan test-unit ext asan coverage test-tools bench docs clean

test: check pytest

$(BIN)/pytest: pyproject.toml tests/requirements-free-threaded.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet $(INSTALL)
	touch $@

check: lint typecheck csrc-check

# The C core compiles, warnings as errors, against the headers of every Python at hand
# that boundlog supports (PYTHON's and pyenv's): the build is optional, so a header that one version stops
# including (3.12's Python.h no longer brings <stddef.h>) would otherwise only leave
# that version without its C core.  A few seconds (no code generated).
PYENV_ROOT ?= $(shell pyenv root 2>/dev/null)
csrc-check:
	@for py in $(PYTHON) $(wildcard $(PYENV_ROOT)/versions/*/bin/python); do \
	  $$py -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || continue; \
	  include=$$($$py -c 'import sysconfig; print(sysconfig.get_paths()["include"])') || exit 1; \
	  case " $$seen " in *" $$include "*) continue;; esac; seen="$$seen $$include"; \
	  echo "csrc against $$include"; \
	  gcc -fsyntax-only -Wall -Wextra -Werror -std=c11 -I"$$include" -Icsrc csrc/*.c csrc/*/*.c \
	    || exit 1; \
	done

lint: $(BIN)/pytest
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(BIN)/pytest
	$(BIN)/mypy src

# The documentation site (mkdocs.yml: docs/ and the API reference from the docstrings)
# into site/, with every warning an error: a broken link or anchor, a page left out of
# the nav, a docstring mkdocstrings cannot read.
docs: $(BIN)/pytest
	$(BIN)/mkdocs build --strict --quiet

# The suite runs on WORKERS parallel pytest processes (pytest-xdist): most tests wait
# on a server or a subprocess rather than use a CPU, so more workers than CPUs pay.
# WORKERS=0 runs it in this one process (pdb, -x, reading one failure).
WORKERS ?= 4
PYTEST := $(BIN)/pytest -n $(WORKERS)

pytest: ext test-tools
	$(PYTEST)

# The whole suite on the pure-Python core (boundlog/_core.py), as CI runs it once.
pytest-pure: ext test-tools
	BOUNDLOG_NO_EXTENSIONS=1 $(PYTEST)

# The unit tests: no server, no subprocess, no Debian tool; under a minute.
UNIT_TESTS ?= tests/unit/public/test_asgi.py tests/unit/record/test_budget.py tests/unit/formats/test_color.py tests/unit/formats/test_escape.py \
	tests/unit/capture/test_extras.py tests/unit/selection/test_filters.py tests/unit/formats/test_json_format.py tests/unit/record/test_notes.py \
	tests/unit/engine/test_queue.py tests/unit/selection/test_redaction.py tests/unit/sinks/test_rotation.py tests/unit/sinks/test_sinks.py \
	tests/unit/formats/test_timestamps.py tests/unit/sinks/test_urls.py tests/unit/engine/test_writer.py tests/unit/record/test_headers.py

test-unit: ext
	$(PYTEST) $(UNIT_TESTS)

# The C core (csrc/**/*.[ch]), built in place by `pip install -e .` (which uses the
# setuptools pyproject.toml asks for, not the venv's): again when a C file is newer
# than the built module.  The module built before is removed first: a failed build
# (setup.py then installs the pure-Python core, and says so in a line --quiet hides)
# must not leave the previous build's module to be tested in its place.  A build that
# fails stops here, saying so (-Werror makes a new warning a failed build; csrc-check's
# -fsyntax-only does not see the warnings only code generation finds, such as a static
# variable a header defines and nothing uses): the suite must not run on the
# pure-Python core unknowingly (tests/speedups/test_speedups.py would fail too).
EXT := src/boundlog/_speedups$(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')

ext: $(EXT)

$(EXT): $(shell find csrc -name '*.[ch]') setup.py | $(BIN)/pytest
	rm -f $(EXT)
	$(BIN)/pip install --quiet --no-deps -e .
	@test -f $(EXT) || { echo "make ext: the C core did not build; the compiler's error:" >&2; \
	  $(BIN)/pip install --no-deps -e . -v 2>&1 | grep -E -A3 'error|C extension not built' >&2; \
	  exit 1; }

# The C core under AddressSanitizer and UndefinedBehaviorSanitizer: the package built
# apart, into build/asan/lib (PYTHONPATH puts it before the editable install), then the
# tests that run it.  libasan is preloaded into the interpreter, which is not built
# with it; PYTHONMALLOC=malloc lets it see every allocation, Python objects included;
# CPython's own leaks at exit are not ours (detect_leaks=0).
ASAN_TESTS ?= tests/speedups/test_speedups.py tests/speedups/test_speedups_json.py tests/speedups/test_speedups_logfmt.py tests/speedups/test_speedups_otlp.py tests/speedups/test_speedups_relp.py tests/speedups/test_speedups_packed.py tests/speedups/test_speedups_learn.py tests/speedups/test_speedups_templates.py \
	tests/speedups/test_speedups_asgi.py tests/unit/formats/test_templates.py \
	tests/speedups/test_speedups_handoff.py tests/speedups/test_speedups_queue.py tests/unit/engine/test_pending.py \
	tests/speedups/test_speedups_environ.py tests/speedups/test_speedups_gunicorn.py tests/speedups/test_speedups_select.py \
	tests/speedups/test_speedups_wsgi.py tests/unit/selection/test_filters.py tests/unit/selection/test_redaction.py tests/unit/public/test_wsgi.py \
	tests/unit/formats/test_formats.py tests/unit/formats/test_json_format.py tests/unit/formats/test_logfmt_format.py tests/unit/public/test_asgi.py tests/unit/engine/test_writer.py \
	tests/unit/public/test_cli.py tests/unit/record/test_notes.py tests/unit/capture/test_extras.py tests/unit/capture/test_completed.py
ASAN_ENV := PYTHONPATH=build/asan/lib PYTHONMALLOC=malloc ASAN_OPTIONS=detect_leaks=0 \
	UBSAN_OPTIONS=print_stacktrace=1 LD_PRELOAD=$$(gcc -print-file-name=libasan.so)

# The suite without the files `make asan` runs: CI runs both on one Python, so that each
# test runs there once, the C core's own under the sanitizers.
pytest-not-asan: ext test-tools
	$(PYTEST) $(addprefix --ignore=,$(ASAN_TESTS))

asan: $(BIN)/pytest
	rm -rf build/asan
	BOUNDLOG_CFLAGS='-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g' \
	  $(BIN)/pip install --quiet --no-deps --target build/asan/lib .
	rm -rf build/lib.* build/temp.* build/bdist.*  # no sanitized module for a later build
	$(ASAN_ENV) $(BIN)/python -c 'import boundlog._speedups as s; assert "build/asan" in s.__file__, s.__file__'
	$(ASAN_ENV) $(PYTEST) -p no:cacheprovider $(ASAN_TESTS)

# The suite under coverage.py, measuring the branch coverage of src/boundlog in pytest
# and in every server the tests start ([tool.coverage.run] in pyproject.toml): each
# process writes a .coverage.* file, combined into .coverage.  The report lists the
# modules not fully covered, and fails under the level held ([tool.coverage.report]
# fail_under).  `$(BIN)/coverage html` then writes htmlcov/.
coverage: ext test-tools
	rm -f .coverage .coverage.*
	$(BIN)/coverage run -m pytest -n $(WORKERS)
	$(BIN)/coverage combine --quiet
	$(BIN)/coverage report

# The Debian packages the suite drives, as `command:package`: tests/e2e/test_bench.py runs
# wrk, tests/e2e/test_faults_rotation.py logrotate, tests/e2e/test_readers.py lnav and goaccess,
# tests/e2e/test_e2e_rsyslog.py rsyslogd, tests/unit/metrics/test_metrics.py prometheus,
# tests/e2e/test_bench.py perf (the breakdown's system calls).  A package with
# no command of its own is named by a file it installs (`/path/glob:package`): rsyslog's
# TLS driver (gtls), its RELP input, and the Kafka and Elasticsearch outputs
# docs/shipping.md configures.  Their tests skip without them, so `make test` installs
# the missing ones with apt-get when it is root on Debian/Ubuntu, and otherwise stops,
# naming the packages.
TEST_TOOLS := wrk:wrk logrotate:logrotate lnav:lnav goaccess:goaccess rsyslogd:rsyslog \
	/usr/lib/*/rsyslog/lmnsd_gtls.so:rsyslog-gnutls /usr/lib/*/rsyslog/imrelp.so:rsyslog-relp \
	/usr/lib/*/rsyslog/omkafka.so:rsyslog-kafka \
	/usr/lib/*/rsyslog/omelasticsearch.so:rsyslog-elasticsearch prometheus:prometheus \
	perf:linux-perf

test-tools:
	@missing=""; \
	for tool in $(TEST_TOOLS); do \
	  case "$${tool%%:*}" in \
	    /*) ls $${tool%%:*} >/dev/null 2>&1 || missing="$$missing $${tool#*:}";; \
	    *) PATH="$$PATH:/usr/sbin:/sbin" command -v "$${tool%%:*}" >/dev/null 2>&1 \
	         || missing="$$missing $${tool#*:}";; \
	  esac; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && [ -f /etc/debian_version ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  else \
	    echo "make test needs the Debian packages:$$missing" >&2; \
	    echo "  sudo apt-get install$$missing   (or brew install$$missing)" >&2; \
	    exit 1; \
	  fi; \
	fi

# The quick benchmark matrix (docs/performance.md), in .venv with the `bench` extra.
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
	rm -rf $(VENV) .venv-[0-9]* .pytest_cache .mypy_cache .ruff_cache .hypothesis
	rm -rf .coverage .coverage.* htmlcov site
	rm -rf build dist src/*.egg-info src/boundlog/*.so
