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

Lines go to files in a temporary folder.  CPU is the worker's utime + stime from
/proc over each slice (10 ms ticks: ~1% at 2 s slices).  Needs wrk and the bench extra;
run from the repository: ``python benchmarks/gunicorn_pairs.py`` (about 2 minutes).
This file is also the application gunicorn serves (``create_app``).
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MODES = ("none", "capture-only", "middleware", "logger-class", "default")
_MODE_ENV = "BOUNDLOG_PAIRS_MODE"
_HERE = Path(__file__).resolve().parent
_REQUESTS = re.compile(rb"(\d+) requests in ")


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


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _start(mode: str, threads: int, folder: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    logging = {
        "logger-class": ["--logger-class", "boundlog.gunicorn.Logger", "--access-logfile", "-"],
        "default": ["--access-logfile", "-"],
    }.get(mode, [])
    with (folder / f"{mode}.log").open("wb") as sink:
        server = subprocess.Popen(
            ["taskset", "-c", "0", sys.executable, "-m", "gunicorn", "--worker-class", "gthread",
             "--workers", "1", "--threads", str(threads), "--bind", f"127.0.0.1:{port}",
             "--no-control-socket", "--pythonpath", str(_HERE), *logging,
             "gunicorn_pairs:create_app()"],
            env={**os.environ, _MODE_ENV: mode}, stdout=sink, stderr=subprocess.DEVNULL,
        )  # fmt: skip
    return server, port


def _worker(server: subprocess.Popen[bytes], port: int) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"gunicorn exited with status {server.returncode}")
        children = Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()
        if children:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return int(children[0])
            except OSError:
                pass
        time.sleep(0.1)
    raise SystemExit("gunicorn did not start within 30 s")


def _cpu_ticks(pid: int) -> int:
    ticks = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        # The fields after the parenthesised name: utime and stime are the 12th and 13th.
        fields = Path(f"/proc/{pid}/task/{task}/stat").read_text().rpartition(")")[2].split()
        ticks += int(fields[11]) + int(fields[12])
    return ticks


def _load(port: int, seconds: int) -> int:
    output = subprocess.run(
        ["taskset", "-c", "1", "wrk", "-t1", "-c64", f"-d{seconds}s", f"http://127.0.0.1:{port}/"],
        capture_output=True, check=True,
    ).stdout  # fmt: skip
    found = _REQUESTS.search(output)
    if found is None:
        raise SystemExit(f"wrk printed no request count:\n{output.decode()}")
    return int(found.group(1))


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
    tick_us = 1e6 / os.sysconf("SC_CLK_TCK")
    per_request: dict[str, list[float]] = {mode: [] for mode in modes}
    with tempfile.TemporaryDirectory() as folder:
        servers = {mode: _start(mode, args.threads, Path(folder)) for mode in modes}
        try:
            workers = {mode: _worker(*servers[mode]) for mode in modes}
            for mode in modes:
                _load(servers[mode][1], 1)  # warm-up
            for index in range(args.slices):
                for mode in modes if index % 2 == 0 else modes[::-1]:
                    before = _cpu_ticks(workers[mode])
                    requests = _load(servers[mode][1], args.seconds)
                    ticks = _cpu_ticks(workers[mode]) - before
                    per_request[mode].append(ticks * tick_us / requests)
        finally:
            for server, _ in servers.values():
                server.terminate()
            for server, _ in servers.values():
                server.wait()
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
