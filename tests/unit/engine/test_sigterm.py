"""SIGTERM where no server catches it: the logs are drained, then the process dies of it.

systemd, Docker and Kubernetes stop a service with SIGTERM.  waitress, http.server and
a plain script leave it its default action, which ends the process at once, before the
writer thread wrote what waits in the queue.  A log built in the main thread while
SIGTERM has that default action drains every open log on SIGTERM, then ends the
process with the status SIGTERM's default action gives.  A handler a server installed
is never replaced.  Each server here is started as README.md's rows say, with no
signal handling of its own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from _records import make_record
from _servers import (
    CLIENT_TIMEOUT,
    LOOPBACK,
    PYTHON,
    STOP_TIMEOUT,
    UVICORN_CLEAN_EXITS,
    http_client,
    read_log_lines,
    running_server,
)
from boundlog import AccessLog

REQUESTS = 40

MYAPP = """\
def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"hello\\n"]
"""

WAITRESS_MAIN = """\
import boundlog.wsgi
from myapp import app

app = boundlog.wsgi.AccessLogMiddleware(app, sink="access.log")
"""

HTTP_SERVER = """\
import sys
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import boundlog.http_server
from boundlog import AccessLog


class Handler(boundlog.http_server.AccessLogMixin, SimpleHTTPRequestHandler):
    access_log = AccessLog("access.log")
    # One connection, one thread: a request is read only once the one before was logged.
    protocol_version = "HTTP/1.1"


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""

# The app, and so its log, exists before uvicorn.run captures SIGTERM; uvicorn puts
# the previous handler back when it has stopped and raises the signal again.
UVICORN_RUN = """\
import sys

import uvicorn

from boundlog.asgi import AccessLogMiddleware


async def hello(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            await send({"type": message["type"] + ".complete"})
            if message["type"] == "lifespan.shutdown":
                return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"hello\\n"})


app = AccessLogMiddleware(hello, sink="access.log")
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=False)
"""


def _project(tmp_path: Path, files: dict[str, str]) -> Path:
    directory = tmp_path / "project"
    directory.mkdir()
    for name, text in files.items():
        (directory / name).write_text(text)
    return directory


# The variables by which coverage.py (`make coverage`) measures every process the suite
# starts.  Its `sigterm` option then installs a SIGTERM handler in each one, before
# boundlog is imported, and boundlog rightly leaves a handler it finds alone: the
# processes of these tests, which are about SIGTERM's default action, run unmeasured.
_COVERAGE_VARIABLES = ("COVERAGE_PROCESS_CONFIG", "COVERAGE_PROCESS_START")


def _in(directory: Path, argv: Callable[[int], list[str]]) -> Callable[[int], list[str]]:
    def command(port: int) -> list[str]:
        unset = " ".join(_COVERAGE_VARIABLES)
        script = f'unset {unset}; cd "$0" && exec "$@"'
        return ["sh", "-c", script, str(directory), *argv(port)]

    return command


def _serve_then_terminate(
    tmp_path: Path, directory: Path, argv: Callable[[int], list[str]], *, sync: bool = False
) -> str:
    """REQUESTS requests, SIGTERM at once; the process must die of it, every line written.

    A server that submits a record only after the response went out (http.server's
    mixin counts the body's bytes as they are written) may still be between the two
    when the client has its answer: with ``sync``, one more request on the same
    keep-alive connection makes sure the last one was submitted (its own line may or
    may not be written: a record not yet submitted when SIGTERM comes is no loss of
    the log's, the process ends in the middle of its request).
    """
    with running_server(_in(directory, argv), {}, tmp_path / "server.out") as server:
        with http_client(server.port) as client:
            for number in range(REQUESTS):
                response = client.get(f"{server.base_url}/{number}", timeout=CLIENT_TIMEOUT)
                assert response.status_code in (200, 404)
            if sync:
                client.get(f"{server.base_url}/sync", timeout=CLIENT_TIMEOUT)
        # The last lines are still in the writer's window (flush_interval) here.
        status = server.stop()
        output = server.output()
    assert status == -signal.SIGTERM, output
    lines = [line for line in read_log_lines(directory / "access.log") if b"GET /sync " not in line]
    paths = sorted(int(line.split(b'"GET /')[1].split(b" ")[0]) for line in lines)
    assert paths == list(range(REQUESTS)), output
    return output


def test_waitress_serve_drains_on_sigterm(tmp_path: Path) -> None:
    directory = _project(tmp_path, {"myapp.py": MYAPP, "main.py": WAITRESS_MAIN})
    waitress_serve = str(Path(sys.executable).parent / "waitress-serve")
    output = _serve_then_terminate(
        tmp_path,
        directory,
        lambda port: [waitress_serve, f"--listen={LOOPBACK}:{port}", "main:app"],
    )
    assert "boundlog:" not in output, output


def test_http_server_drains_on_sigterm(tmp_path: Path) -> None:
    directory = _project(tmp_path, {"server.py": HTTP_SERVER})
    output = _serve_then_terminate(
        tmp_path, directory, lambda port: [PYTHON, "server.py", str(port)], sync=True
    )
    # The /sync request's record is the one SIGTERM may catch between its response and
    # its submission: the drained log refuses it, and counts and reports it, in the
    # closing line or, refused once the log closed, in a line of its own.
    reports = [line for line in output.splitlines() if line.startswith("boundlog:")]
    caught = (
        f"boundlog: access.log closed: 1 of {REQUESTS + 1:,} records not written"
        f" (1 dropped, 0 failed); {REQUESTS:,} written, 0 filtered"
    )
    after_close = "boundlog: access.log is closed: a record that came after close() was dropped"
    assert (
        reports == []
        or reports == [caught]
        or (len(reports) == 1 and reports[0].startswith(after_close))
    ), output


def test_uvicorn_run_with_the_log_built_first_drains_and_dies_of_sigterm(
    tmp_path: Path,
) -> None:
    directory = _project(tmp_path, {"main.py": UVICORN_RUN})
    _serve_then_terminate(tmp_path, directory, lambda port: [PYTHON, "main.py", str(port)])


SEVERAL_LOGS = """\
import faulthandler
import sys
import time

from _records import make_record
from boundlog import AccessLog

# A SIGABRT from the test (it did not exit) writes every thread's stack.
faulthandler.enable()
# Lines wait in the queue until the log is closed: only the SIGTERM drain writes them.
logs = [AccessLog(f"access-{n}.log", flush_interval=3600) for n in range(3)]
for log in logs:
    for number in range(int(sys.argv[1])):
        assert log.submit(make_record(path=f"/{number}".encode()))
print("ready", flush=True)
# Not signal.pause(): a SIGTERM that arrives after the interpreter's last look at its
# signals and before pause() starts would leave the handler waiting for another signal
# (seen once, on a loaded machine).  A short sleep returns, and the handler then runs.
while True:
    time.sleep(0.05)
"""


def test_several_logs_are_all_drained_on_sigterm(tmp_path: Path) -> None:
    directory = _project(tmp_path, {"several.py": SEVERAL_LOGS})
    tests = str(Path(__file__).parents[2])
    environment = {
        **{key: value for key, value in os.environ.items() if key not in _COVERAGE_VARIABLES},
        "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")]),
    }
    with subprocess.Popen(
        [PYTHON, "several.py", str(REQUESTS)],
        cwd=directory,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    ) as process:
        assert process.stdout is not None
        assert process.stdout.readline() == b"ready\n"
        for n in range(3):
            assert read_log_lines(directory / f"access-{n}.log") == []
        process.send_signal(signal.SIGTERM)
        try:
            status = process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            # A failure with every thread's stack rather than a hang until the suite's
            # timeout.
            process.send_signal(signal.SIGABRT)
            process.wait()
            pytest.fail(
                "no exit on SIGTERM; its threads:\n"
                + process.stdout.read().decode(errors="replace")
            )
        output = process.stdout.read().decode(errors="replace")
    assert status == -signal.SIGTERM, output
    for n in range(3):
        assert len(read_log_lines(directory / f"access-{n}.log")) == REQUESTS, output


def _handler(number: int, frame: object) -> None:
    raise AssertionError("the test never sends this signal")


@contextmanager
def _sigterm_set_to(disposition: Any) -> Iterator[None]:
    """SIGTERM's disposition for the block, the one before restored after it."""
    previous = signal.signal(signal.SIGTERM, disposition)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.parametrize("disposition", [_handler, signal.SIG_IGN], ids=["handler", "SIG_IGN"])
def test_a_disposition_other_than_the_default_is_kept(tmp_path: Path, disposition: Any) -> None:
    with _sigterm_set_to(disposition):
        with AccessLog(str(tmp_path / "access.log")):
            assert signal.getsignal(signal.SIGTERM) is disposition
        assert signal.getsignal(signal.SIGTERM) is disposition


def test_the_default_action_comes_back_when_the_last_log_closes(tmp_path: Path) -> None:
    with _sigterm_set_to(signal.SIG_DFL):
        first = AccessLog(str(tmp_path / "one.log"))
        second = AccessLog(str(tmp_path / "two.log"))
        installed = signal.getsignal(signal.SIGTERM)
        assert callable(installed)
        first.close()
        assert signal.getsignal(signal.SIGTERM) is installed
        second.close()
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_log_built_outside_the_main_thread_installs_nothing(tmp_path: Path) -> None:
    built: list[AccessLog] = []
    with _sigterm_set_to(signal.SIG_DFL):
        thread = threading.Thread(
            target=lambda: built.append(AccessLog(str(tmp_path / "access.log")))
        )
        thread.start()
        thread.join()
        assert len(built) == 1
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        assert built[0].submit(make_record())
        assert built[0].close().written == 1


def test_a_server_handler_installed_after_the_log_is_not_touched(tmp_path: Path) -> None:
    with _sigterm_set_to(signal.SIG_DFL):
        log = AccessLog(str(tmp_path / "access.log"))
        signal.signal(signal.SIGTERM, _handler)  # what gunicorn's arbiter does after a --preload
        log.close()
        assert signal.getsignal(signal.SIGTERM) is _handler


UVICORN_APP = """\
import signal

from boundlog.asgi import AccessLogMiddleware


async def handler(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": repr(signal.getsignal(signal.SIGTERM)).encode()})


app = AccessLogMiddleware(handler, sink="access.log")
"""


def test_uvicorn_keeps_its_own_handler(tmp_path: Path) -> None:
    """``uvicorn main:app`` imports the app, and so builds its log, after it caught SIGTERM."""
    directory = _project(tmp_path, {"main.py": UVICORN_APP})
    uvicorn = str(Path(sys.executable).parent / "uvicorn")
    command = _in(
        directory,
        lambda port: [
            uvicorn,
            "--host",
            LOOPBACK,
            "--port",
            str(port),
            "--no-access-log",
            "main:app",
        ],
    )
    with running_server(command, {}, tmp_path / "server.out") as server:
        response = httpx.get(f"{server.base_url}/", timeout=CLIENT_TIMEOUT)
        assert "Server.handle_exit" in response.text, response.text
        assert server.stop() in UVICORN_CLEAN_EXITS, server.output()
    assert len(read_log_lines(directory / "access.log")) == 1
