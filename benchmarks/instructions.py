"""Instructions per request that an access log adds to uvicorn, counted by callgrind.

The benchmark's CPU-time ratios move by ±15-20% between runs on a shared machine.
Instruction counts do not: valgrind's callgrind counts every instruction each thread
executes, whatever the neighbours do, so a change of 1% shows.  They do not count what
an instruction costs (cache misses, mispredictions), so they rank changes to the code
rather than replace the benchmark; on this project's machine their ratios agreed with
the benchmark's CPU ratios (see benchmarks/HISTORY.md, "Where the time goes").

For each logger (``none``, uvicorn's own ``default``, ``capture-only`` as in the
benchmark, ``boundlog`` with the ``drop`` policy and the combined format; on request,
``boundlog-json``, a JSON log (route and trace ids read), whose middleware collects
each request's notes, over the same application as ``none``; ``boundlog-fields``, the
same with an application that calls ``boundlog.add_fields`` with two fields per
request (a coroutine of its own around the application: its cost is in the sum);
``boundlog-json-no-extras``, the JSON log whose format reads no extras, so that its
middleware asks OpenTelemetry for no span; ``boundlog-received``, the JSON log with
``bytes_received``, whose middleware wraps each request's ``receive`` to count what
the application receives; and ``boundlog-logging``, a ``LoggingSink``
in uvicorn's shape to uvicorn's ``AccessFormatter`` on /dev/null), uvicorn
(httptools, uvloop, one process) runs under callgrind with each thread counted apart;
wrk warms it up, the counters are zeroed, wrk runs for ``--seconds``, and the counters
are dumped.  Printed: instructions per request of the
event-loop thread and of the other threads (boundlog's writer), and their sum against
``none``.

wrk sends a Host field and nothing else; ``--browser`` sends the 14 fields Firefox
sends for a page (``boundlog.bench._wrk.BROWSER_HEADERS`` and Host), which a record
copies and a line searches: what a request costs grows with its header fields.

The server runs with ``PYTHONHASHSEED=0`` (``--hash-seed``): with str hashes drawn
anew for each process, the probes of the scope's dict lookups vary from run to run by
a few hundred instructions a request, as much as a change worth measuring.

Under valgrind the server answers a few hundred requests a second, so the writer
gathers for ``--flush-interval`` (0.5 s) to take batches of the size it takes at full
speed (~150-250 lines); with the default 10 ms, its cost per batch would be spread over
a handful of lines.

Where CPU time and instructions disagree, ``--cache-sim`` has callgrind simulate the
caches too (one cache for all threads, as on the one CPU the benchmark pins a server
to, its last level the 512 KiB level 2 of a core; about twice as slow): it prints each
logger's level-1 instruction and data misses and last-level misses a request, and the
estimate of cycles kcachegrind makes of them (Ir + 10 x level-1 misses + 100 x
last-level misses) against ``none``.  A model, and a
crude one, but as deterministic as the instructions: it tells whether what boundlog
adds costs more than its instructions because of its code (instruction misses) or its
data (data misses).

Needs valgrind (Debian: ``apt-get install valgrind``) and wrk.  Run from the
repository: ``python benchmarks/instructions.py`` (about a minute per logger).
This file is also the application uvicorn serves (``create_app``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from boundlog.bench._wrk import BROWSER_HEADERS

#: ``default`` is uvicorn's own access log, to standard output (here /dev/null).
LOGGERS = ("none", "default", "capture-only", "boundlog")
#: Measured when named in ``--loggers`` (the application's fields).
OPTIONAL_LOGGERS = (
    "boundlog-json", "boundlog-fields", "boundlog-json-no-extras", "boundlog-logging",
    "boundlog-received",
)  # fmt: skip
_LOGGER_ENV = "BENCHMARK_INSTRUCTIONS_LOGGER"
_FLUSH_ENV = "BENCHMARK_INSTRUCTIONS_FLUSH_INTERVAL"
_HERE = Path(__file__).resolve().parent


def create_app() -> Any:
    """The benchmark's 1 KiB application, wrapped with the logger named in the environment."""
    from boundlog.asgi import AccessLogMiddleware
    from boundlog.bench._asgi import CaptureOnlyMiddleware, FixedBodyApp

    app = FixedBodyApp()
    logger = os.environ[_LOGGER_ENV]
    if logger in ("none", "default"):
        return app
    if logger == "capture-only":
        return CaptureOnlyMiddleware(app)
    flush_interval = float(os.environ[_FLUSH_ENV])
    if logger == "boundlog-logging":
        return AccessLogMiddleware(
            app, sink=_uvicorn_formatted_logger(), flush_interval=flush_interval
        )
    if logger in OPTIONAL_LOGGERS:
        inner = _adding_fields(app) if logger == "boundlog-fields" else app
        return AccessLogMiddleware(
            inner,
            sink=os.devnull,
            format=_json_format(logger),
            flush_interval=flush_interval,
        )
    # The middleware owns its log, so it drains it at the lifespan shutdown.
    return AccessLogMiddleware(app, sink=os.devnull, flush_interval=flush_interval)


def _json_format(logger: str) -> Any:
    """The JSON format of a logger: as it is, reading no extras (its middleware reads no
    span), or adding the request body's bytes (its middleware counts what the
    application receives)."""
    from boundlog import JsonFormat

    if logger == "boundlog-received":
        return JsonFormat(extras=["bytes_received"])
    if logger != "boundlog-json-no-extras":
        return "json"

    class JsonWithoutExtras(JsonFormat):
        __slots__ = ()
        reads_extras = frozenset()

    return JsonWithoutExtras()


def _uvicorn_formatted_logger() -> Any:
    """A LoggingSink in uvicorn's shape, to uvicorn's AccessFormatter on /dev/null."""
    import logging

    from uvicorn.logging import AccessFormatter

    from boundlog import LoggingSink

    handler = logging.StreamHandler(open(os.devnull, "w"))  # noqa: SIM115 - lives as long as uvicorn
    handler.setFormatter(
        AccessFormatter('%(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s')
    )
    logger = logging.getLogger("bench.access")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return LoggingSink(logger.name, message="uvicorn")


def _adding_fields(app: Any) -> Any:
    """``app``, called after adding two fields to the request's record."""
    from boundlog import add_fields

    async def adding(scope: Any, receive: Any, send: Any) -> None:
        add_fields(user="ada", tenant=7)
        await app(scope, receive, send)

    return adding


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_until_listening(port: int, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"uvicorn exited with status {server.returncode} under valgrind")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit("uvicorn did not listen within 5 minutes under valgrind")


def _wrk(
    port: int, seconds: float, connections: int, headers: Sequence[tuple[str, str]] = ()
) -> int:
    output = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s",
         *(argument for name, value in headers for argument in ("-H", f"{name}: {value}")),
         f"http://127.0.0.1:{port}/"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    match = re.search(r"(\d+) requests in", output)
    if match is None:
        raise SystemExit(f"wrk printed no request count:\n{output}")
    return int(match.group(1))


#: The last level of the simulated caches (size, ways, line): the 512 KiB level 2 a core
#: of the benchmark's machine has to itself, rather than the level 3 it shares with
#: its neighbours, which valgrind would take (and in which little misses).
LAST_LEVEL = "524288,8,64"
#: callgrind's events with --cache-sim=yes, in its order.
CACHE_EVENTS = ("Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw")


def _thread_totals(folder: Path) -> list[list[int]]:
    """The events of each thread in the first dump, in thread order: its instructions,
    then (with --cache-sim) the rest of CACHE_EVENTS."""
    totals = []
    for path in sorted(folder.glob("callgrind.out.*.1-*")):
        match = re.search(r"^(?:summary|totals):((?: \d+)+)", path.read_text(), re.MULTILINE)
        if match is not None and int(match.group(1).split()[0]):
            totals.append([int(count) for count in match.group(1).split()])
    return totals


def measure(
    logger: str,
    seconds: float,
    connections: int,
    flush_interval: float,
    keep: Path | None,
    headers: Sequence[tuple[str, str]] = (),
    hash_seed: str = "0",
    cache_sim: bool = False,
) -> list[list[float]]:
    """Events per request of each busy thread of uvicorn serving ``logger``: its
    instructions, and with ``cache_sim`` the rest of CACHE_EVENTS.

    With ``keep``, callgrind's files stay in ``keep/logger`` for callgrind_annotate.
    """
    port = _free_port()
    with contextlib.ExitStack() as stack:
        if keep is None:
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="boundlog-instr-"))
        else:
            folder = str(keep / logger)
            shutil.rmtree(folder, ignore_errors=True)
            os.makedirs(folder)
        environ = {
            **os.environ,
            _LOGGER_ENV: logger,
            _FLUSH_ENV: str(flush_interval),
            "PYTHONHASHSEED": hash_seed,
        }
        server = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--separate-threads=yes",
             *(["--cache-sim=yes", f"--LL={LAST_LEVEL}"] if cache_sim else []),
             f"--callgrind-out-file={folder}/callgrind.out.%p",
             sys.executable, "-m", "uvicorn", "instructions:create_app", "--factory",
             "--app-dir", str(_HERE), "--host", "127.0.0.1", "--port", str(port),
             "--http", "httptools", "--loop", "uvloop", "--lifespan", "on",
             "--access-log" if logger == "default" else "--no-access-log"],
            env=environ, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            _wait_until_listening(port, server)
            _wrk(port, 5, connections, headers)
            subprocess.run(["callgrind_control", "--zero", str(server.pid)], check=True,
                           capture_output=True)  # fmt: skip
            requests = _wrk(port, seconds, connections, headers)
            subprocess.run(["callgrind_control", "--dump", str(server.pid)], check=True,
                           capture_output=True)  # fmt: skip
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=120)
        return [[count / requests for count in events] for events in _thread_totals(Path(folder))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loggers", default=",".join(LOGGERS), help="comma-separated")
    parser.add_argument("--seconds", type=float, default=15.0, help="counted window")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--flush-interval", type=float, default=0.5)
    parser.add_argument(
        "--browser",
        action="store_true",
        help="send the header fields Firefox sends for a page instead of wrk's Host alone",
    )
    parser.add_argument(
        "--hash-seed",
        default="0",
        help="the server's PYTHONHASHSEED (default 0: the same str hashes in every run; "
        "'random' draws them anew, as Python does by default)",
    )
    parser.add_argument(
        "--cache-sim",
        action="store_true",
        help="simulate the caches too: misses a request and an estimate of cycles",
    )
    parser.add_argument(
        "--keep", type=Path, help="keep callgrind's files in KEEP/<logger> (callgrind_annotate)"
    )
    args = parser.parse_args()
    for tool in ("valgrind", "callgrind_control", "wrk"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is missing: apt-get install valgrind wrk")
    loggers = args.loggers.split(",")
    for logger in loggers:
        if logger not in LOGGERS + OPTIONAL_LOGGERS:
            raise SystemExit(
                f"unknown logger {logger!r}: choose from {', '.join(LOGGERS + OPTIONAL_LOGGERS)}"
            )
    baseline = None
    baseline_cycles = None
    heading = "logger          event loop     writer       total   vs none"
    if args.cache_sim:
        heading += "      I1m     D1m    LLm     cycles   vs none"
    print(f"{heading}   (a request)")
    for logger in loggers:
        threads = measure(
            logger, args.seconds, args.connections, args.flush_interval, args.keep,
            BROWSER_HEADERS if args.browser else (), args.hash_seed, args.cache_sim,
        )  # fmt: skip
        loop, writer = threads[0][0], sum(thread[0] for thread in threads[1:])
        total = loop + writer
        if logger == "none":
            baseline = total
        ratio = f"{total / baseline:7.3f}x" if baseline else "        "
        line = f"{logger:<14} {loop:11,.0f} {writer:11,.0f} {total:11,.0f}  {ratio}"
        if args.cache_sim:
            # Every thread's, as the simulated cache is the one all threads share.
            named = {
                event: sum(thread[i] for thread in threads) for i, event in enumerate(CACHE_EVENTS)
            }
            data = named["D1mr"] + named["D1mw"]
            last_level = named["ILmr"] + named["DLmr"] + named["DLmw"]
            # kcachegrind's estimate of cycles.
            cycles = named["Ir"] + 10 * (named["I1mr"] + data) + 100 * last_level
            if logger == "none":
                baseline_cycles = cycles
            line += f"  {named['I1mr']:7,.0f} {data:7,.0f} {last_level:6,.0f} {cycles:10,.0f}"
            if baseline_cycles:
                line += f"  {cycles / baseline_cycles:7.3f}x"
        print(line)


if __name__ == "__main__":
    main()
