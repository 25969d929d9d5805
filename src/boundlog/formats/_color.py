"""Whether a format may colour its lines: the caller, the environment and the sink decide.

Two informal conventions set the environment's part.  ``NO_COLOR`` (no-color.org), set
and not empty, turns colour off; ``FORCE_COLOR`` (force-color.org), set and not empty,
turns it on even when output is not a terminal.  When both are set, ``FORCE_COLOR``
wins: force-color.org's reference code checks it last, Node.js and chalk do the same,
and it is the narrower request (set for one command, such as ``| less -R`` or a CI
job, where ``NO_COLOR`` usually comes from a profile).  CPython 3.13's own traceback
colours let ``NO_COLOR`` win instead.  ``FORCE_COLOR=0`` and ``FORCE_COLOR=false``
turn colour off, as Node.js and chalk read them.  Otherwise colour goes only to a
terminal, and not to one whose ``TERM`` is ``dumb``.  An explicit ``color=True`` or
``color=False`` overrides the environment, as no-color.org asks of per-instance options.
"""

from __future__ import annotations

from collections.abc import Mapping

_FORCE_COLOR_OFF = frozenset(("0", "false"))


def use_color(environ: Mapping[str, str], *, is_terminal: bool) -> bool:
    """Whether to colour lines going to a sink that is (or is not) a terminal."""
    force = environ.get("FORCE_COLOR", "")
    if force:
        return force.lower() not in _FORCE_COLOR_OFF
    if environ.get("NO_COLOR", ""):
        return False
    return is_terminal and environ.get("TERM") != "dumb"
