"""A server's CPU per request and requests/s with each way of logging, in paired slices.

The benchmark starts a fresh server for every trial, so the trials of two loggers are
5-10 s apart, and on a shared machine the neighbours' load changes on that scale: in
one run, gunicorn without any log moved between 144 and 195 µs of CPU a request from
trial to trial.  Here every server runs at once (each pinned to CPU 0, idle while the
others are measured), and wrk (pinned to CPU 1) loads them in turn, ``--seconds`` each,
for ``--slices`` rounds whose order alternates.  Each slice of a logger is compared with
the ``none`` slice next to it, and the median of those ratios is printed with its
quartiles: a noisy spell then spoils one pair, not a whole cell.

``--server uvicorn`` (httptools, uvloop, one process, as the benchmark runs it; the
benchmark's 1 KiB ASGI application), ``--modes`` among:

* ``none``: no access log;
* ``boundlog``: ``boundlog.asgi.AccessLogMiddleware`` (drop, combined, a file);
* ``boundlog-json``: the same with the JSON format (route and trace ids read);
* ``default``: uvicorn's own access log, to a file.

``--server gunicorn`` (a gthread worker of ``--threads`` threads; the benchmark's 1 KiB
WSGI application), ``--modes`` among:

* ``none``: no access log;
* ``capture-only``: the benchmark's WSGI capture-only middleware, the floor under any
  logging middleware;
* ``middleware``: ``boundlog.wsgi.AccessLogMiddleware`` (drop, combined, a file);
* ``logger-class``: ``--logger-class boundlog.gunicorn.Logger``, what the benchmark's
  boundlog cells run under gunicorn;
* ``default``: gunicorn's own access log.

Lines go to files in a temporary folder.  CPU is the utime + stime of each server's
process tree over its slice, read from /proc as the benchmark reads it (10 ms ticks:
~1% at 2 s slices); servers, wrk and the readings are the benchmark's own.  Needs wrk
and the bench extra; ``--browser`` sends the 14 header fields Firefox sends for a page
instead of wrk's Host alone (``boundlog bench --browser``'s).  Run from the repository: ``python
benchmarks/pairs.py`` (about
2 minutes).  This file is also the application the servers serve (``create_asgi_app``,
``create_wsgi_app``).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from boundlog.bench._procstat import tree_cpu_seconds
from boundlog.bench._servers import HOST, free_port, probe, wait_until_ready
from boundlog.bench._spawn import spawn, stop
from boundlog.bench._wrk import BROWSER_HEADERS, find_wrk, run_wrk, write_script

MODES = {
    "uvicorn": ("none", "boundlog", "boundlog-json", "default"),
    "gunicorn": ("none", "capture-only", "middleware", "logger-class", "default"),
}
DEFAULT_MODES = {"uvicorn": "none,boundlog,boundlog-json", "gunicorn": "none,logger-class"}
_MODE_ENV = "BENCHMARK_PAIRS_MODE"
_SINK_ENV = "BENCHMARK_PAIRS_SINK"
_HERE = Path(__file__).resolve().parent
_SERVER_CPU = 0
_LOAD_CPU = 1


def create_asgi_app() -> Any:
    """The benchmark's 1 KiB ASGI application, wrapped as the mode in the environment asks."""
    from boundlog.asgi import AccessLogMiddleware
    from boundlog.bench._asgi import FixedBodyApp

    mode, sink = os.environ[_MODE_ENV], os.environ[_SINK_ENV]
    app = FixedBodyApp()
    if mode == "boundlog":
        return AccessLogMiddleware(app, sink=sink)
    if mode == "boundlog-json":
        return AccessLogMiddleware(app, sink=sink, format="json")
    return app


def create_wsgi_app() -> Any:
    """The benchmark's 1 KiB WSGI application, wrapped as the mode in the environment asks."""
    from boundlog.bench._wsgi import CaptureOnlyMiddleware, fixed_body_app
    from boundlog.wsgi import AccessLogMiddleware

    mode = os.environ[_MODE_ENV]
    if mode == "capture-only":
        return CaptureOnlyMiddleware(fixed_body_app)
    if mode == "middleware":
        return AccessLogMiddleware(fixed_body_app, sink=os.environ[_SINK_ENV])
    return fixed_body_app


def _command(server: str, mode: str, port: int, threads: int, sink: Path) -> list[str]:
    if server == "uvicorn":
        return [
            sys.executable, "-m", "uvicorn", "pairs:create_asgi_app", "--factory",
            "--app-dir", str(_HERE), "--host", HOST, "--port", str(port),
            "--http", "httptools", "--loop", "uvloop",
            *(["--log-config", str(_uvicorn_log_config(sink))] if mode == "default"
              else ["--no-access-log"]),
        ]  # fmt: skip
    logging = {
        "logger-class": [
            "--logger-class",
            "boundlog.gunicorn.Logger",
            "--access-logfile",
            str(sink),
        ],
        "default": ["--access-logfile", str(sink)],
    }.get(mode, [])
    return [
        sys.executable, "-m", "gunicorn", "--worker-class", "gthread", "--workers", "1",
        "--threads", str(threads), "--bind", f"{HOST}:{port}", "--no-control-socket",
        "--pythonpath", str(_HERE), *logging, "pairs:create_wsgi_app()",
    ]  # fmt: skip


def _uvicorn_log_config(sink: Path) -> Path:
    """uvicorn's own logging configuration, its access lines to the file ``sink``."""
    import json

    from uvicorn.config import LOGGING_CONFIG

    config = json.loads(json.dumps(LOGGING_CONFIG))
    config["handlers"]["access"] = {
        "formatter": "access", "class": "logging.FileHandler", "filename": str(sink),
    }  # fmt: skip
    path = sink.with_suffix(".json")
    path.write_text(json.dumps(config))
    return path


def _start(
    server: str, mode: str, threads: int, folder: Path
) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    sink = folder / f"{mode}.log"
    environment = {**os.environ, _MODE_ENV: mode, _SINK_ENV: str(sink)}
    with (folder / f"{mode}.out").open("wb") as out, (folder / f"{mode}.err").open("wb") as err:
        process = spawn(
            _command(server, mode, port, threads, sink), _SERVER_CPU, env=environment,
            stdout=out, stderr=err,
        )  # fmt: skip
    wait_until_ready(process, port, folder / f"{mode}.err")
    probe(port)
    return process, port


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", choices=sorted(MODES), default="uvicorn")
    parser.add_argument("--modes", help="comma-separated, none first (default: per server)")
    parser.add_argument("--slices", type=int, default=15)
    parser.add_argument("--seconds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4, help="gunicorn's gthread threads")
    parser.add_argument(
        "--browser",
        action="store_true",
        help="send the header fields Firefox sends for a page instead of wrk's Host alone",
    )
    args = parser.parse_args()
    modes = (args.modes or DEFAULT_MODES[args.server]).split(",")
    if modes[0] != "none" or not set(modes) <= set(MODES[args.server]):
        parser.error(f"--modes: start with none, then any of {', '.join(MODES[args.server][1:])}")
    wrk = find_wrk("wrk")
    cpu: dict[str, list[float]] = {mode: [] for mode in modes}
    rate: dict[str, list[float]] = {mode: [] for mode in modes}
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        script = write_script(folder, BROWSER_HEADERS if args.browser else ())
        servers: dict[str, tuple[subprocess.Popen[bytes], int]] = {}
        try:
            for mode in modes:
                servers[mode] = _start(args.server, mode, args.threads, folder)

            def load(mode: str, seconds: int) -> tuple[float, float]:
                """CPU µs a request of ``mode``'s server, and its requests/s, over
                ``seconds`` of load."""
                server, port = servers[mode]
                before = tree_cpu_seconds(server.pid)
                result = run_wrk(
                    wrk, f"http://{HOST}:{port}/", seconds=seconds, connections=64,
                    script=script, cpu=_LOAD_CPU,
                )  # fmt: skip
                used = tree_cpu_seconds(server.pid) - before
                return used * 1e6 / result.requests, result.requests / seconds

            for mode in modes:
                load(mode, 1)  # warm-up
            for index in range(args.slices):
                for mode in modes if index % 2 == 0 else modes[::-1]:
                    per_request, per_second = load(mode, args.seconds)
                    cpu[mode].append(per_request)
                    rate[mode].append(per_second)
        finally:
            for server, _ in servers.values():
                stop(server, 10, signal.SIGINT if args.server == "uvicorn" else signal.SIGTERM)
    threads = f", {args.threads} threads" if args.server == "gunicorn" else ""
    print(f"{args.server}{threads}; CPU µs per request in each slice:")
    for mode in modes:
        values = " ".join(f"{value:.0f}" for value in cpu[mode])
        print(f"  {mode:13} median {statistics.median(cpu[mode]):6.1f}  ({values})")
    print("against none, slice by slice: CPU per request, requests/s")
    for mode in modes[1:]:
        print(
            f"  {mode:13} CPU {_paired(cpu[mode], cpu['none'])}   req/s {_paired(rate[mode], rate['none'])}"
        )


def _paired(values: list[float], baseline: list[float]) -> str:
    """The median of the slice-by-slice ratios, with their quartiles."""
    ratios = [a / b for a, b in zip(values, baseline, strict=True)]
    low, median, high = statistics.quantiles(ratios, n=4)
    return f"{median:.3f}x ({low:.3f}-{high:.3f})"


if __name__ == "__main__":
    main()
