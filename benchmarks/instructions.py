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
are dumped.  Printed: instructions per request of the server's threads (uvicorn's
event loop), of boundlog's writer thread, and their sum against ``none``.

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

``--server gunicorn`` counts gunicorn's gthread worker (one worker, ``--threads``
threads, the benchmark's 1 KiB WSGI application) instead: ``none``; ``default``,
gunicorn's own access log to /dev/null; ``capture-only``, the benchmark's WSGI
capture-only middleware; ``boundlog``, the logger class a gunicorn user deploys
(``--logger-class boundlog.gunicorn.Logger``, the combined line to /dev/null); on
request ``boundlog-middleware``, ``boundlog.wsgi.AccessLogMiddleware``.  gunicorn
serves from a process it forks, which ``callgrind_control`` cannot reach, and
callgrind's client requests zero and dump the calling thread only: so the worker, once
started (``post_worker_init``, this file being gunicorn's configuration too), zeroes
and dumps on a signal by callgrind's monitor commands, which act on every thread, sent
from a few lines of C built for the run (gcc and ``valgrind/valgrind.h``, which
Debian's valgrind package installs).

Needs valgrind (Debian: ``apt-get install valgrind``) and wrk.  Run from the
repository: ``python benchmarks/instructions.py`` (about a minute per logger).
This file is also the application uvicorn and gunicorn serve (``create_app``,
``create_wsgi_app``) and gunicorn's configuration.
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
from collections.abc import Callable, Sequence
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
#: Under ``--server gunicorn``: ``boundlog`` is the logger class.
GUNICORN_LOGGERS = ("none", "default", "capture-only", "boundlog")
GUNICORN_OPTIONAL_LOGGERS = ("boundlog-middleware",)
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


def create_wsgi_app() -> Any:
    """The benchmark's 1 KiB WSGI application, wrapped as the logger in the environment
    asks (gunicorn's own log and its boundlog logger class need no wrapper)."""
    from boundlog.bench._wsgi import CaptureOnlyMiddleware, fixed_body_app
    from boundlog.wsgi import AccessLogMiddleware

    logger = os.environ[_LOGGER_ENV]
    if logger == "capture-only":
        return CaptureOnlyMiddleware(fixed_body_app)
    if logger == "boundlog-middleware":
        flush_interval = float(os.environ[_FLUSH_ENV])
        return AccessLogMiddleware(fixed_body_app, sink=os.devnull, flush_interval=flush_interval)
    return fixed_body_app


#: callgrind's monitor commands from inside the process: ``VALGRIND_MONITOR_COMMAND``
#: (valgrind.h) is a sequence of instructions that valgrind recognises, which only C
#: can emit.  "zero" and "dump" act on every thread, where the client requests
#: ``CALLGRIND_ZERO_STATS`` and ``CALLGRIND_DUMP_STATS`` act on the calling one.
_MONITOR_C = """\
#include <valgrind/valgrind.h>
int monitor(const char *command) { return (int)VALGRIND_MONITOR_COMMAND(command); }
"""
#: The folder of the gunicorn worker's markers and of the monitor's library.
_CONTROL_ENV = "BENCHMARK_INSTRUCTIONS_CONTROL"
#: The signals on which the worker zeroes the counters and dumps them.
_ZERO_SIGNAL = signal.SIGRTMIN + 1
_DUMP_SIGNAL = signal.SIGRTMIN + 2


def post_worker_init(worker: Any) -> None:
    """gunicorn's hook (this file is its configuration): in the worker, zero and dump
    callgrind's counters on a signal, and say so with a file in the control folder."""
    import ctypes

    folder = Path(os.environ[_CONTROL_ENV])
    monitor = ctypes.CDLL(str(folder / "monitor.so")).monitor

    def acting_on(command: bytes) -> Any:
        def handler(signum: int, frame: Any) -> None:
            monitor(command)
            (folder / command.decode()).write_text("")

        return handler

    signal.signal(_ZERO_SIGNAL, acting_on(b"zero"))
    signal.signal(_DUMP_SIGNAL, acting_on(b"dump"))
    # Renamed into place: the benchmark reads the pid as soon as the file exists.
    (folder / "ready.part").write_text(str(os.getpid()))
    os.replace(folder / "ready.part", folder / "ready")


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


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _wait_until(ready: Callable[[], bool], server: subprocess.Popen[bytes], what: str) -> None:
    """Until ``ready()``, which the server under valgrind may take minutes to make so."""
    deadline = time.monotonic() + 300
    while not ready():
        if server.poll() is not None:
            raise SystemExit(f"the server exited with status {server.returncode} under valgrind")
        if time.monotonic() > deadline:
            raise SystemExit(f"the server did not {what} within 5 minutes under valgrind")
        time.sleep(0.2)


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


def _thread_totals(folder: Path) -> tuple[list[list[int]], list[list[int]]]:
    """The events of each thread in the first dump: the server's threads, then boundlog's
    writer; each thread's instructions, then (with --cache-sim) the rest of CACHE_EVENTS.

    The writer is the thread that took records from boundlog's queue (its C function
    ``queue_take``; with the pure-Python core it is counted among the server's).
    """
    server: list[list[int]] = []
    writer: list[list[int]] = []
    for path in sorted(folder.glob("callgrind.out.*.1-*")):
        text = path.read_text()
        match = re.search(r"^(?:summary|totals):((?: \d+)+)", text, re.MULTILINE)
        if match is not None and int(match.group(1).split()[0]):
            events = [int(count) for count in match.group(1).split()]
            (writer if " queue_take\n" in text else server).append(events)
    return server, writer


def _valgrind(folder: str, cache_sim: bool) -> list[str]:
    return [
        "valgrind", "--tool=callgrind", "--separate-threads=yes",
        *(["--cache-sim=yes", f"--LL={LAST_LEVEL}"] if cache_sim else []),
        f"--callgrind-out-file={folder}/callgrind.out.%p",
    ]  # fmt: skip


def _uvicorn_command(logger: str, port: int) -> list[str]:
    return [
        sys.executable, "-m", "uvicorn", "instructions:create_app", "--factory",
        "--app-dir", str(_HERE), "--host", "127.0.0.1", "--port", str(port),
        "--http", "httptools", "--loop", "uvloop", "--lifespan", "on",
        "--access-log" if logger == "default" else "--no-access-log",
    ]  # fmt: skip


def _gunicorn_command(logger: str, port: int, threads: int) -> list[str]:
    logging = {
        "default": ["--access-logfile", os.devnull],
        "boundlog": ["--logger-class", "boundlog.gunicorn.Logger", "--access-logfile", os.devnull],
    }.get(logger, [])
    return [
        sys.executable, "-m", "gunicorn", "--config", str(Path(__file__).resolve()),
        "--worker-class", "gthread", "--workers", "1", "--threads", str(threads),
        "--bind", f"127.0.0.1:{port}", "--no-control-socket", "--chdir", str(_HERE),
        *logging, "instructions:create_wsgi_app()",
    ]  # fmt: skip


def _build_monitor(folder: Path) -> None:
    source = folder / "monitor.c"
    source.write_text(_MONITOR_C)
    built = subprocess.run(
        ["gcc", "-shared", "-fPIC", "-O1", "-o", str(folder / "monitor.so"), str(source)],
        capture_output=True, text=True,
    )  # fmt: skip
    if built.returncode != 0:
        raise SystemExit(
            "--server gunicorn builds a few lines of C with gcc and valgrind/valgrind.h "
            f"(Debian: apt-get install gcc valgrind):\n{built.stderr}"
        )


def measure(
    logger: str,
    seconds: float,
    connections: int,
    flush_interval: float,
    keep: Path | None,
    headers: Sequence[tuple[str, str]] = (),
    hash_seed: str = "0",
    cache_sim: bool = False,
    server_name: str = "uvicorn",
    threads: int = 4,
) -> tuple[list[list[float]], list[list[float]]]:
    """Events per request of each busy thread of the server serving ``logger``, its own
    threads then boundlog's writer: its instructions, and with ``cache_sim`` the rest of
    CACHE_EVENTS.

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
        control = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="boundlog-ctl-")))
        environ = {
            **os.environ,
            _LOGGER_ENV: logger,
            _FLUSH_ENV: str(flush_interval),
            _CONTROL_ENV: str(control),
            "PYTHONHASHSEED": hash_seed,
        }
        if server_name == "gunicorn":
            environ["BOUNDLOG_FLUSH_INTERVAL"] = str(flush_interval)  # its logger class's
            _build_monitor(control)
            command = _gunicorn_command(logger, port, threads)
        else:
            command = _uvicorn_command(logger, port)
        server = subprocess.Popen(
            _valgrind(folder, cache_sim) + command,
            env=environ, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            _wait_until(lambda: _listening(port), server, "listen")
            if server_name == "gunicorn":
                # The worker gunicorn forked: callgrind_control cannot reach it, so it
                # zeroes and dumps itself when signalled (post_worker_init).
                _wait_until((control / "ready").exists, server, "start its worker")
                worker = int((control / "ready").read_text())
                _wrk(port, 5, connections, headers)
                os.kill(worker, _ZERO_SIGNAL)
                _wait_until((control / "zero").exists, server, "zero its counters")
                requests = _wrk(port, seconds, connections, headers)
                os.kill(worker, _DUMP_SIGNAL)
                _wait_until((control / "dump").exists, server, "dump its counters")
            else:
                _wrk(port, 5, connections, headers)
                subprocess.run(["callgrind_control", "--zero", str(server.pid)], check=True,
                               capture_output=True)  # fmt: skip
                requests = _wrk(port, seconds, connections, headers)
                subprocess.run(["callgrind_control", "--dump", str(server.pid)], check=True,
                               capture_output=True)  # fmt: skip
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=120)
        server_threads, writer_threads = _thread_totals(Path(folder))
        return (
            [[count / requests for count in events] for events in server_threads],
            [[count / requests for count in events] for events in writer_threads],
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", choices=("uvicorn", "gunicorn"), default="uvicorn")
    parser.add_argument(
        "--loggers", help="comma-separated (default: every logger of the server but the optional)"
    )
    parser.add_argument("--seconds", type=float, default=15.0, help="counted window")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--threads", type=int, default=4, help="gunicorn's gthread threads")
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
    known, optional = (
        (GUNICORN_LOGGERS, GUNICORN_OPTIONAL_LOGGERS)
        if args.server == "gunicorn"
        else (LOGGERS, OPTIONAL_LOGGERS)
    )
    loggers = args.loggers.split(",") if args.loggers else list(known)
    for logger in loggers:
        if logger not in known + optional:
            raise SystemExit(
                f"unknown logger {logger!r} for {args.server}: choose from "
                f"{', '.join(known + optional)}"
            )
    baseline = None
    baseline_cycles = None
    heading = "logger              server     writer       total   vs none"
    if args.cache_sim:
        heading += "      I1m     D1m    LLm     cycles   vs none"
    print(f"{heading}   (a request)")
    for logger in loggers:
        threads = measure(
            logger, args.seconds, args.connections, args.flush_interval, args.keep,
            BROWSER_HEADERS if args.browser else (), args.hash_seed, args.cache_sim,
            args.server, args.threads,
        )  # fmt: skip
        server_threads, writer_threads = threads
        loop = sum(thread[0] for thread in server_threads)
        writer = sum(thread[0] for thread in writer_threads)
        total = loop + writer
        if logger == "none":
            baseline = total
        ratio = f"{total / baseline:7.3f}x" if baseline else "        "
        line = f"{logger:<19} {loop:10,.0f} {writer:11,.0f} {total:11,.0f}  {ratio}"
        if args.cache_sim:
            # Every thread's, as the simulated cache is the one all threads share.
            named = {
                event: sum(thread[i] for thread in server_threads + writer_threads)
                for i, event in enumerate(CACHE_EVENTS)
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
