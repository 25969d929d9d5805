"""gunicorn's CPU per request with each way of logging, measured in paired slices.

The benchmark starts a fresh server for every trial, so the trials of two loggers are
5-10 s apart, and on a shared machine the neighbours' load changes on that scale: in
one run, gunicorn without any log moved between 144 and 195 µs of CPU a request from
trial to trial.  Here every server runs at once (each a gunicorn gthread worker pinned
to CPU 0, idle while the others are measured), and wrk (pinned to CPU 1) loads them in
turn, ``--seconds`` each, for ``--slices`` rounds whose order alternates.  Each slice of
a logger is compared with the ``none`` slice next to it, and the median of those ratios
is printed with its quartiles: a noisy spell then spoils one pair, not a whole cell.

The ways of logging (``--modes``):

* ``none``: no access log;
* ``capture-only``: the benchmark's WSGI capture-only middleware, the floor under any
  logging middleware;
* ``middleware``: ``boundlog.wsgi.AccessLogMiddleware`` (drop, combined, stdout);
* ``logger-class``: ``--logger-class boundlog.gunicorn.Logger --access-logfile -``,
  what the benchmark's boundlog cells run under gunicorn;
* ``default``: gunicorn's own ``--access-logfile -``.

Lines go to files in a temporary folder.  CPU is the utime + stime of each server's
process tree over its slice, read from /proc as the benchmark reads it (10 ms ticks:
~1% at 2 s slices); servers, wrk and the readings are the benchmark's own.  Needs wrk
and the bench extra; run from the repository: ``python benchmarks/gunicorn_pairs.py``
(about 2 minutes).
This file is also the application gunicorn serves (``create_app``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from boundlog.bench._procstat import tree_cpu_seconds
from boundlog.bench._servers import HOST, free_port, probe, wait_until_ready
from boundlog.bench._spawn import spawn, stop
from boundlog.bench._wrk import find_wrk, run_wrk, write_script

MODES = ("none", "capture-only", "middleware", "logger-class", "default")
_MODE_ENV = "BENCHMARK_PAIRS_MODE"
_HERE = Path(__file__).resolve().parent
_SERVER_CPU = 0
_LOAD_CPU = 1


def create_app() -> Any:
    """The benchmark's 1 KiB WSGI application, wrapped as the mode in the environment asks."""
    from boundlog.bench._wsgi import CaptureOnlyMiddleware, fixed_body_app
    from boundlog.wsgi import AccessLogMiddleware

    mode = os.environ[_MODE_ENV]
    if mode == "capture-only":
        return CaptureOnlyMiddleware(fixed_body_app)
    if mode == "middleware":
        return AccessLogMiddleware(fixed_body_app, sink="stdout")
    return fixed_body_app


def _start(mode: str, threads: int, folder: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    logging = {
        "logger-class": ["--logger-class", "boundlog.gunicorn.Logger", "--access-logfile", "-"],
        "default": ["--access-logfile", "-"],
    }.get(mode, [])
    command = [
        sys.executable, "-m", "gunicorn", "--worker-class", "gthread", "--workers", "1",
        "--threads", str(threads), "--bind", f"{HOST}:{port}", "--no-control-socket",
        "--pythonpath", str(_HERE), *logging, "gunicorn_pairs:create_app()",
    ]  # fmt: skip
    with (folder / f"{mode}.log").open("wb") as sink, (folder / f"{mode}.err").open("wb") as err:
        server = spawn(
            command, _SERVER_CPU, env={**os.environ, _MODE_ENV: mode}, stdout=sink, stderr=err
        )
    wait_until_ready(server, port, folder / f"{mode}.err")
    probe(port)
    return server, port


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", default="none,capture-only,middleware,logger-class")
    parser.add_argument("--slices", type=int, default=15)
    parser.add_argument("--seconds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4, help="gthread threads (bench: 4)")
    args = parser.parse_args()
    modes = args.modes.split(",")
    if modes[0] != "none" or not set(modes) <= set(MODES):
        parser.error(f"--modes: start with none, then any of {', '.join(MODES[1:])}")
    wrk = find_wrk("wrk")
    per_request: dict[str, list[float]] = {mode: [] for mode in modes}
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        script = write_script(folder)
        servers: dict[str, tuple[subprocess.Popen[bytes], int]] = {}
        try:
            for mode in modes:
                servers[mode] = _start(mode, args.threads, folder)

            def load(mode: str, seconds: int) -> float:
                """CPU µs a request of ``mode``'s server over ``seconds`` of load."""
                server, port = servers[mode]
                before = tree_cpu_seconds(server.pid)
                result = run_wrk(
                    wrk, f"http://{HOST}:{port}/", seconds=seconds, connections=64,
                    script=script, cpu=_LOAD_CPU,
                )  # fmt: skip
                return (tree_cpu_seconds(server.pid) - before) * 1e6 / result.requests

            for mode in modes:
                load(mode, 1)  # warm-up
            for index in range(args.slices):
                for mode in modes if index % 2 == 0 else modes[::-1]:
                    per_request[mode].append(load(mode, args.seconds))
        finally:
            for server, _ in servers.values():
                stop(server, 10)
    print(f"gunicorn gthread, {args.threads} threads; CPU µs per request in each slice:")
    for mode in modes:
        values = " ".join(f"{value:.0f}" for value in per_request[mode])
        print(f"  {mode:13} median {statistics.median(per_request[mode]):6.1f}  ({values})")
    print("against none, slice by slice:")
    for mode in modes[1:]:
        ratios = [a / b for a, b in zip(per_request[mode], per_request["none"], strict=True)]
        low, median, high = statistics.quantiles(ratios, n=4)
        print(f"  {mode:13} median {median:.3f}x  (quartiles {low:.3f}-{high:.3f})")


if __name__ == "__main__":
    main()
