"""The ``boundlog`` command."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from ._version import __version__


def build_parser() -> argparse.ArgumentParser:
    """The command line, with one sub-command per job."""
    parser = argparse.ArgumentParser(
        prog="boundlog",
        description=(
            "Access logs for Python web servers that cost almost nothing: a bounded "
            "queue, a writer thread, and every record written or counted."
        ),
    )
    parser.add_argument("--version", action="version", version=f"boundlog {__version__}")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; return its exit status."""
    parser = build_parser()
    parser.parse_args(argv)
    parser.print_help()
    return 0
