"""Fixtures shared by the unit tests; what tests import is in _helpers.py."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from _helpers import BlockedPipe

# A shell without job control starts background commands (`make test &`, a CI runner's
# `nohup ... &`) with SIGINT ignored, and an ignored signal stays ignored across exec:
# every server a test starts would then ignore SIGINT, and Python would not even install
# its KeyboardInterrupt handler, so a test that stops a server with SIGINT (waitress)
# would wait in vain.  Restored here, servers start with SIGINT at its default.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def blocked_pipe() -> Iterator[BlockedPipe]:
    """A pipe whose writer blocks until the test releases it."""
    pipe = BlockedPipe()
    yield pipe
    pipe.close()
