"""The loggers under test, as they run inside a server process.

The harness tells a server process which logger to use through environment variables
(``BOUNDLOG_BENCH_*``), because each server is started through its own command line and
imports the benchmark application by name.  Every logger writes to the process's
standard output, which the harness points at the sink.

* ``none``: no access log at all, the baseline.
* ``default``: the server's own access log, switched on by its command line.
* ``capture-only``: what any access log in a middleware must do before it can log, and
  nothing more: capture the status and count the body bytes, built as lean as boundlog's
  own capture; no record, no line.  Its cost is the floor under every middleware-based
  logger, boundlog's ASGI middleware included.
* ``naive``: one combined-format line formatted and written synchronously per request,
  with a flush, the way most hand-written logging middleware does it.
* ``stdlib-queue``: the same line through ``logging.handlers.QueueHandler`` and a
  ``QueueListener`` thread, the standard library's recipe for logging off the request
  path.
* ``boundlog-drop`` / ``boundlog-wait``: boundlog with that policy, through the
  integration a user of the server deploys: the ASGI middleware under uvicorn and
  granian, the logger class under gunicorn (see ``_gunicorn``), the handler mixin under
  http.server.
"""

from __future__ import annotations

import atexit
import gc
import inspect
import json
import logging
import logging.handlers
import os
import queue
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from boundlog import AccessLog, Stats


def _access_log_default(option: str) -> int:
    # The benchmark uses only boundlog's public API: the defaults are the ones
    # AccessLog's signature documents.
    default: int = inspect.signature(AccessLog).parameters[option].default
    return default


BOUNDLOG_MAX_QUEUE = _access_log_default("max_queue")
BOUNDLOG_BATCH_SIZE = _access_log_default("batch_size")

BODY = b"boundlog bench: a fixed body of exactly 1 KiB.\n".ljust(1023, b".") + b"\n"

#: The name boundlog gives its writer thread (threading's, which /proc does not show).
WRITER = "boundlog-writer"

_ENV_LOGGER = "BOUNDLOG_BENCH_LOGGER"
_ENV_STATS_FILE = "BOUNDLOG_BENCH_STATS_FILE"
_ENV_STATS_SOCKET = "BOUNDLOG_BENCH_STATS_SOCKET"
_ENV_MAX_QUEUE = "BOUNDLOG_BENCH_MAX_QUEUE"
_ENV_SINK = "BOUNDLOG_BENCH_SINK"

Emit = Callable[[str], None]


@dataclass(frozen=True)
class LoggerConfig:
    """Which logger a server process runs, and where it reports boundlog's final stats."""

    logger: str = "none"
    stats_file: str = ""
    max_queue: int = BOUNDLOG_MAX_QUEUE
    #: The name of the abstract Unix socket where the server answers boundlog's counters.
    stats_socket: str = ""
    #: Where boundlog's loggers send their lines: stdout, or a collector's URL.
    sink: str = "stdout"

    def environ(self) -> dict[str, str]:
        """The environment variables that carry this configuration to a server."""
        return {
            _ENV_LOGGER: self.logger,
            _ENV_STATS_FILE: self.stats_file,
            _ENV_MAX_QUEUE: str(self.max_queue),
            _ENV_STATS_SOCKET: self.stats_socket,
            _ENV_SINK: self.sink,
        }

    @classmethod
    def from_environ(cls) -> LoggerConfig:
        """The configuration the harness passed to this server process."""
        return cls(
            logger=os.environ.get(_ENV_LOGGER, "none"),
            stats_file=os.environ.get(_ENV_STATS_FILE, ""),
            max_queue=int(os.environ.get(_ENV_MAX_QUEUE, BOUNDLOG_MAX_QUEUE)),
            stats_socket=os.environ.get(_ENV_STATS_SOCKET, ""),
            sink=os.environ.get(_ENV_SINK, "stdout"),
        )

    @property
    def policy(self) -> str:
        """boundlog's overload policy, for the boundlog loggers."""
        return self.logger.removeprefix("boundlog-")


def combined_line(
    client: str | None,
    method: str,
    target: str,
    protocol: str,
    status: int,
    size: int,
    referer: str | None,
    user_agent: str | None,
) -> str:
    """A combined-format line built the obvious way: strftime and an f-string."""
    now = time.strftime("%d/%b/%Y:%H:%M:%S %z")
    return (
        f'{client or "-"} - - [{now}] "{method} {target} {protocol}" {status} {size} '
        f'"{referer or "-"}" "{user_agent or "-"}"\n'
    )


def naive_emitter() -> Emit:
    """Write and flush each line on the request path."""
    stdout = sys.stdout

    def emit(line: str) -> None:
        stdout.write(line)
        stdout.flush()

    return emit


def queue_emitter() -> tuple[Emit, Callable[[], None]]:
    """Log each line through QueueHandler; return the emitter and the listener's stop."""
    records: queue.Queue[logging.LogRecord] = queue.Queue()
    handler = logging.StreamHandler(sys.stdout)
    handler.terminator = ""
    listener = logging.handlers.QueueListener(records, handler)
    logger = logging.getLogger("boundlog.bench.access")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.addHandler(logging.handlers.QueueHandler(records))
    listener.start()
    stopped = False

    def stop() -> None:
        # Drains what is queued; called at shutdown and again (harmlessly) at exit.
        nonlocal stopped
        if not stopped:
            stopped = True
            listener.stop()

    atexit.register(stop)
    return logger.info, stop


def stats_json(stats: Stats) -> bytes:
    """boundlog's counters as the stats socket and the stats file report them."""
    return json.dumps(stats._asdict()).encode()


def process_json(log: AccessLog | None) -> bytes:
    """What the stats socket answers: boundlog's counters (None for another logger),
    the garbage collector's runs so far (all, and full: of its oldest generation) and
    the native id of boundlog's writer thread."""
    writers = [thread.native_id for thread in threading.enumerate() if thread.name == WRITER]
    collections = [generation["collections"] for generation in gc.get_stats()]
    return json.dumps({
        "counters": log.stats()._asdict() if log is not None else None,
        "gc_collections": sum(collections),
        "gc_full_collections": collections[-1],
        "writer_tid": writers[0] if writers else None,
    }).encode()  # fmt: skip


def serve_stats(log: AccessLog | None, name: str) -> None:
    """Answer ``process_json(log)`` to each connection to the abstract Unix socket ``name``.

    The harness reads it before and after every trial, for every logger (``log`` is
    None but for boundlog's).  Through a URL of the
    server, the check for that URL would run on every request of the boundlog cells and
    of no other: an ``async def`` wrapper cost uvicorn's event loop 1.9k instructions per
    request (callgrind), a plain function 1.3k, about 1% each.  A thread of its own,
    asleep in ``accept`` during the timed window, costs the request path nothing.
    """
    if not name:
        return
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # A leading NUL byte names a socket in Linux's abstract namespace: no file to remove,
    # no path length limit from the output folder.
    listener.bind("\0" + name)
    listener.listen()

    def answer() -> None:
        while True:
            connection, _ = listener.accept()
            with connection:
                connection.sendall(process_json(log))

    threading.Thread(target=answer, name="bench-stats", daemon=True).start()


def final_stats_writer(close: Callable[[], Stats], stats_file: str) -> Callable[[], None]:
    """A shutdown hook that closes the log and writes its final stats to ``stats_file``.

    ``AccessLog.close`` is idempotent, so the hook may run from a lifespan shutdown and
    again from ``atexit``; whichever runs first drains the log.
    """

    def write_final_stats() -> None:
        stats = close()
        if stats_file:
            Path(stats_file).write_bytes(stats_json(stats))

    atexit.register(write_final_stats)
    return write_final_stats
