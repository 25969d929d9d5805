"""Fixtures shared by the unit tests; what tests import is in _helpers.py."""

from __future__ import annotations

import importlib.util
import signal
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# A few test modules import another's helpers by its name (`from test_extras import
# ...`): every folder of tests is on sys.path, as the top one is (pytest puts a conftest's
# folder there), so that this works whichever files a run collects and in what order.
_TESTS = Path(__file__).parent
for _folder in sorted({path.parent for path in _TESTS.glob("*/**/test_*.py")}):
    if str(_folder) not in sys.path:
        sys.path.append(str(_folder))

import _strategies  # noqa: E402, F401  (registers the strategy of a record's extras)
from _examples import examples  # noqa: E402
from _helpers import BlockedPipe  # noqa: E402

# A shell without job control starts background commands (`make test &`, a CI runner's
# `nohup ... &`) with SIGINT ignored, and an ignored signal stays ignored across exec:
# every server a test starts would then ignore SIGINT, and Python would not even install
# its KeyboardInterrupt handler, so a test that stops a server with SIGINT (waitress)
# would wait in vain.  Restored here, servers start with SIGINT at its default.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# Hypothesis measures time in two checks, its deadline (an example slower than 200 ms
# fails) and the too_slow health check: a timing, which the suite never asserts.  The
# suite runs on parallel workers (pytest -n) next to servers and other runs, where a
# draw or an example may wait its turn for a CPU; the properties hold whatever the
# time.  Every test's @settings starts from this profile, whose count of examples (for a
# test that names none) scales with PROPERTY_EXAMPLES as each test's own does (_examples.py).
settings.register_profile(
    "boundlog",
    max_examples=examples(100),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("boundlog")


FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


def pytest_report_header() -> str:
    if not FREE_THREADED:
        return "free-threaded: no"
    # A C extension that does not declare itself safe without the GIL turns it back on
    # when it is imported, with a RuntimeWarning, which this suite makes an error.
    enabled = sys._is_gil_enabled()
    return f"free-threaded: yes, the GIL is {'ENABLED' if enabled else 'disabled'}"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # `needs(package)`: the test runs a package that a free-threaded CPython cannot
    # install (tests/requirements-free-threaded.txt says why).  It skips there; on any
    # other build a missing package fails the test as it would without the marker.
    if not FREE_THREADED:
        return
    for item in items:
        for marker in item.iter_markers("needs"):
            (package,) = marker.args
            if importlib.util.find_spec(package) is None:
                item.add_marker(
                    pytest.mark.skip(reason=f"{package} does not install on free-threaded CPython")
                )


@pytest.fixture
def blocked_pipe() -> Iterator[BlockedPipe]:
    """A pipe whose writer blocks until the test releases it."""
    pipe = BlockedPipe()
    yield pipe
    pipe.close()
