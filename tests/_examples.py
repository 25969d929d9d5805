"""How many examples each property test runs: its full count, or a share of it.

Every property test names its full count (``max_examples=examples(500)``).  CI runs the
whole suite on every Python and both cores, but not every run needs the full counts to
prove what it is there for: the run under coverage needs each branch reached, not each
reached 500 times, and generating hostile records is most of a property test's time
(more so under a tracer, or on a free-threaded CPython with its specialising interpreter
off).  ``PROPERTY_EXAMPLES=0.25`` runs a quarter of each count (at least ``MINIMUM``);
the runs that compare the cores for what they are (the C core under AddressSanitizer,
the C core on the default build) and ``make test`` keep the full counts.  Not a
``BOUNDLOG_*`` name: boundlog refuses a variable of its own it does not know, in every
server the tests start.
"""

from __future__ import annotations

import os

#: The fewest examples a property test runs, whatever the share.
MINIMUM = 20


def _share() -> float:
    text = os.environ.get("PROPERTY_EXAMPLES", "1")
    try:
        share = float(text)
    except ValueError:
        share = -1.0
    if not 0 < share <= 1:
        raise ValueError(
            f"PROPERTY_EXAMPLES={text!r}: give the share of each property test's examples"
            " to run, a number above 0 and at most 1 (1, the default, runs them all)"
        )
    return share


SHARE = _share()


def examples(full: int) -> int:
    """``full``, the test's own count, scaled by ``PROPERTY_EXAMPLES``."""
    return max(MINIMUM, round(full * SHARE)) if SHARE < 1 else full
