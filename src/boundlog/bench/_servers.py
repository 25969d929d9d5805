"""Starting each server under test as a real process on a loopback port, and talking to it.

Each server runs with one worker process and the settings its documentation recommends
for speed: uvicorn with httptools and uvloop; gunicorn with gthread; granian's ASGI
interface; the standard library's ThreadingHTTPServer with keep-alive.
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import importlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from ._errors import BenchError
from ._loggers import BODY, LoggerConfig
from ._spawn import spawn

HOST = "127.0.0.1"
_READY_TIMEOUT = 30.0
_REQUEST_TIMEOUT = 30.0
_ASGI_APP = "boundlog.bench._asgi:create_app"
_WSGI_APP = "boundlog.bench._wsgi:create_app()"
# boundlog runs in gunicorn as the logger class a gunicorn user deploys (see _gunicorn).
_GUNICORN_LOGGER = "boundlog.bench._gunicorn.BenchLogger"
# Python modules each server needs, checked before a run starts.
REQUIREMENTS = {
    "uvicorn": ("uvicorn", "httptools", "uvloop"),
    "gunicorn": ("gunicorn",),
    "granian": ("granian",),
    "stdlib": (),
}
# And those each peer needs (the `bench` extra installs them).
PEER_REQUIREMENTS = {
    "asgi-logger": ("asgi_logger",),
    "fapilog": ("fapilog", "starlette"),
    "otel-batch": ("opentelemetry.sdk",),
}


@functools.cache
def _gunicorn_without_control_socket() -> list[str]:
    # Recent gunicorns listen on a control socket at one fixed path, shared by every
    # gunicorn on the machine; switch it off where the option exists.
    config = importlib.import_module("gunicorn.config")
    return ["--no-control-socket"] if hasattr(config, "ControlSocketDisable") else []


def server_command(
    server: str, logger: str, port: int, *, gunicorn_threads: int, access_logfile: str = "-"
) -> list[str]:
    """The command line that starts ``server`` with its own access log on or off.

    ``access_logfile``: where gunicorn's boundlog logger class writes (a collector's URL).
    """
    own_log = logger == "default"
    boundlog = logger.startswith("boundlog-")
    python = sys.executable
    if server == "uvicorn":
        return [
            python, "-m", "uvicorn", _ASGI_APP, "--factory", "--host", HOST, "--port", str(port),
            "--http", "httptools", "--loop", "uvloop", "--lifespan", "on",
            "--access-log" if own_log else "--no-access-log",
        ]  # fmt: skip
    if server == "gunicorn":
        return [
            python, "-m", "gunicorn", "--worker-class", "gthread", "--workers", "1",
            "--threads", str(gunicorn_threads), "--bind", f"{HOST}:{port}",
            *_gunicorn_without_control_socket(), "--graceful-timeout", "5",
            *(["--access-logfile", access_logfile if boundlog else "-"] if own_log or boundlog else []),
            *(["--logger-class", _GUNICORN_LOGGER] if boundlog else []), _WSGI_APP,
        ]  # fmt: skip
    if server == "granian":
        return [
            python, "-m", "granian", "--interface", "asgi", "--host", HOST, "--port", str(port),
            "--workers", "1", "--factory", "--access-log" if own_log else "--no-access-log",
            _ASGI_APP,
        ]  # fmt: skip
    if server == "stdlib":
        return [python, "-m", "boundlog.bench._stdlib_server", "--host", HOST, "--port", str(port)]
    raise ValueError(f"unknown server {server!r}")


def free_port() -> int:
    """A loopback port nobody is listening on right now."""
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def start_server(
    command: list[str],
    config: LoggerConfig,
    *,
    stdout_fd: int,
    stderr: IO[bytes],
    cpu: int | None,
) -> subprocess.Popen[bytes]:
    """Start the server with its stdout on the sink and its stderr in a diagnostics file."""
    environ = {**os.environ, **config.environ()}
    return spawn(
        command, cpu, env=environ, stdin=subprocess.DEVNULL, stdout=stdout_fd, stderr=stderr
    )


def _stderr_tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-15:])


def wait_until_ready(process: subprocess.Popen[bytes], port: int, stderr_path: Path) -> None:
    """Poll the port until it accepts connections; fail if the server dies or is too slow."""
    deadline = time.monotonic() + _READY_TIMEOUT
    while True:
        if process.poll() is not None:
            raise BenchError(
                f"the server exited with status {process.returncode} before listening:\n"
                + _stderr_tail(stderr_path)
            )
        with contextlib.suppress(OSError), socket.create_connection((HOST, port), timeout=1.0):
            return
        if time.monotonic() > deadline:
            raise BenchError(
                f"the server did not listen on port {port} within {_READY_TIMEOUT:.0f} s:\n"
                + _stderr_tail(stderr_path)
            )
        time.sleep(0.05)


def _get(port: int, path: str) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection(HOST, port, timeout=_REQUEST_TIMEOUT)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def probe(port: int) -> None:
    """Send one request and check the exact status and body before anything is timed."""
    try:
        status, body = _get(port, "/")
    except OSError as error:
        raise BenchError(f"the probe request failed: {error}") from error
    if status != 200 or body != BODY:
        raise BenchError(
            f"the probe request got status {status} and a {len(body)}-byte body "
            f"(expected 200 and the fixed {len(BODY)}-byte body): {body[:80]!r}"
        )


def ask_server(name: str) -> dict[str, Any]:
    """What the server answers on its stats socket (see ``_loggers.process_json``)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(_REQUEST_TIMEOUT)
            client.connect("\0" + name)
            body = b"".join(iter(functools.partial(client.recv, 65536), b""))
        answer: dict[str, Any] = json.loads(body)
    except (OSError, ValueError) as error:
        raise BenchError(f"cannot read the server's counters: {error}") from error
    return answer


def fetch_stats(name: str) -> dict[str, int]:
    """boundlog's counters in the server process, from its stats socket."""
    counters: dict[str, int] | None = ask_server(name)["counters"]
    if counters is None:
        raise BenchError("the server runs no boundlog log: it has no counters")
    return counters
