"""The ``boundlog`` command."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from ._core import description as core_description
from ._version import __version__
from .bench._cli import configure_parser as configure_bench_parser
from .bench._cli import run_from as run_bench


def build_parser() -> argparse.ArgumentParser:
    """The command line, with one sub-command per job."""
    parser = argparse.ArgumentParser(
        prog="boundlog",
        description=(
            "Access logs for Python web servers that cost almost nothing: a bounded "
            "queue, a writer thread, and every record written or counted."
        ),
    )
    parser.add_argument(
        "--version", action="version", version=f"boundlog {__version__} ({core_description})"
    )
    commands = parser.add_subparsers(dest="command", title="commands", metavar="COMMAND")
    bench = commands.add_parser(
        "bench",
        help="measure what access logging costs real servers (needs wrk and boundlog[bench])",
    )
    configure_bench_parser(bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; return its exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "bench":
        return run_bench(args)
    parser.print_help()
    return 0
