"""Log rotation with the real logrotate program, under continuous load.

``create`` renames the file and creates an empty one: the log keeps writing to the
renamed file until it reopens the path, on SIGUSR1 sent by logrotate's postrotate
script, or by noticing the new inode itself (``watch=True``).  ``copytruncate`` copies
the file and truncates it in place: the log keeps its descriptor, and only because
boundlog opens with O_APPEND does its next write land at the new end of the file
instead of at its old offset, behind a run of NUL bytes.

Every load client sends its numbered requests one after another on one keep-alive
connection, and its record is handed to the log before the server reads the next
request on that connection (uvicorn: before the response goes out; a gunicorn gthread
worker: in ``close()``, before the connection goes back to its poller).  So each
client's records reach the log in order, and a client's requests found in a rotated
file must all come before those found in the next one: that is what "no record is
written to the old file after the reopen" looks like from outside.
"""

from __future__ import annotations

import itertools
import shutil
import signal
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from _servers import (
    Load,
    fault_environment,
    final_stats,
    gunicorn_fault_command,
    load_requests,
    poll_until,
    read_log_lines,
    running_server,
    uvicorn_fault_command,
)

LOGROTATE = shutil.which("logrotate") or shutil.which("logrotate", path="/usr/sbin:/sbin")
ROTATIONS = 2
CLEAN_EXITS = (0, -signal.SIGTERM)
SERVERS: dict[str, Callable[[int], list[str]]] = {
    "uvicorn": uvicorn_fault_command,
    "gunicorn": gunicorn_fault_command("-k", "gthread", "--threads", "4", "-w", "2"),
    "gunicorn --preload": gunicorn_fault_command(
        "--preload", "-k", "gthread", "--threads", "4", "-w", "2"
    ),
}

pytestmark = pytest.mark.skipif(
    LOGROTATE is None, reason="needs logrotate (Debian package logrotate)"
)


def _logrotate_config(log_path: Path, mode: str, server_pid: int) -> str:
    directives = ["rotate 5", "nocompress", "missingok"]
    if mode == "copytruncate":
        directives.append("copytruncate")
    else:
        directives.append("create 0644")
    if mode == "create+signal":
        directives += ["postrotate", f"    kill -USR1 {server_pid}", "endscript"]
    body = "".join(f"    {directive}\n" for directive in directives)
    return f"{log_path} {{\n{body}}}\n"


def _logrotate(tmp_path: Path, log_path: Path, mode: str, server_pid: int) -> Callable[[], None]:
    """A function that runs logrotate once, forced, on ``log_path`` in ``mode``."""
    assert LOGROTATE is not None
    config = tmp_path / "logrotate.conf"
    config.write_text(_logrotate_config(log_path, mode, server_pid))
    command = [LOGROTATE, "--force", "--state", str(tmp_path / "state"), str(config)]

    def rotate() -> None:
        rotated = subprocess.run(command, capture_output=True, text=True)
        assert rotated.returncode == 0, rotated.stderr

    return rotate


def _has_lines(path: Path) -> bool:
    # About 200 lines: each file gets a share of the load worth checking.
    return path.exists() and path.stat().st_size >= 16 * 1024


def _in_a_copytruncate_window(numbers: list[list[int]], number: int) -> bool:
    """Whether a client's lost request ``number`` fits one rotation's window.

    ``numbers`` are the client's requests found in each file, oldest file first.  A
    client's records are written in order, so one lost between the copy and the
    truncate of rotation k comes after everything the client has in files up to k and
    before everything it has in the later ones, and the later files hold some of its
    requests (the load goes on after every rotation).  The earlier files may hold none:
    a client whose first requests fell in the first window (its thread started late).
    """
    return any(
        all(found < number for earlier in numbers[: k + 1] for found in earlier)
        and any(numbers[k + 1 :])
        and all(found > number for later in numbers[k + 1 :] for found in later)
        for k in range(len(numbers) - 1)
    )


def _span(found: list[int]) -> str:
    return f"{found[0]}..{found[-1]} ({len(found)})" if found else "none"


@pytest.mark.parametrize(
    ("server_name", "mode"),
    [
        ("uvicorn", "create+signal"),
        ("uvicorn", "create+watch"),
        ("uvicorn", "copytruncate"),
        # The master passes SIGUSR1 on to its workers, whose handler is boundlog's.
        ("gunicorn", "create+signal"),
        ("gunicorn --preload", "create+watch"),
    ],
)
def test_logrotate_under_load_splits_the_log_without_loss_or_nul(
    tmp_path: Path, server_name: str, mode: str
) -> None:
    """Each response is in exactly one file, in order; copytruncate loses only its own window."""
    log_path = tmp_path / "access.log"
    stats_dir = tmp_path / "stats"
    stats_dir.mkdir()
    options: dict[str, object] = {"sink": str(log_path)}
    if mode == "create+signal":
        options["reopen_signal"] = int(signal.SIGUSR1)
    elif mode == "create+watch":
        options["watch"] = True
    environment = fault_environment(options, stats_dir)
    with running_server(SERVERS[server_name], environment, tmp_path / "out") as server:
        rotate = _logrotate(tmp_path, log_path, mode, server.process.pid)
        with Load(server.port) as load:
            for rotation in range(ROTATIONS + 1):
                # After a rotation, lines in the new file mean the writer has switched
                # to it (create), or writes again at its start (copytruncate).
                poll_until(lambda: _has_lines(log_path), 30, f"lines after rotation {rotation}")
                if rotation < ROTATIONS:
                    rotate()
        assert not load.errors, load.errors[:5]
        assert server.stop() in CLEAN_EXITS, server.output()
    assert "boundlog:" not in server.output(), server.output()

    # Oldest first: access.log.2, access.log.1, access.log.
    files = [log_path.with_name(f"access.log.{n}") for n in range(ROTATIONS, 0, -1)] + [log_path]
    per_file = []
    for path in files:
        data = path.read_bytes()
        assert b"\0" not in data, f"NUL bytes in {path.name}"
        if mode == "copytruncate" and path != log_path and not data.endswith(b"\n"):
            # logrotate copied while a batch was being written: the copy may end inside
            # a line whose rest was truncated away, part of copytruncate's own window.
            path.write_bytes(data[: data.rfind(b"\n") + 1])
        per_file.append(load_requests(read_log_lines(path)))
    logged: Counter[tuple[int, int]] = sum(per_file, Counter())
    assert max(logged.values()) == 1, "a response is logged twice"
    assert set(logged) <= load.completed

    clients = {client for client, _ in load.completed}
    for client in clients:
        numbers = [sorted(n for c, n in requests if c == client) for requests in per_file]
        for earlier, later in itertools.pairwise(numbers):
            assert not earlier or not later or earlier[-1] < later[0], (
                f"client {client}: a record went to an older file after a newer one"
            )
    missing = load.completed - set(logged)
    if mode == "copytruncate":
        # logrotate's documented window: lines written between its copy and its
        # truncate are in neither file.
        for client, number in missing:
            numbers = [sorted(n for c, n in requests if c == client) for requests in per_file]
            assert _in_a_copytruncate_window(numbers, number), (
                f"request {client}/{number} lost outside a copytruncate window: the client's "
                f"numbers by file, oldest first: {[_span(found) for found in numbers]}"
            )
    else:
        assert not missing, f"{len(missing)} responses missing, e.g. {sorted(missing)[:5]}"
        written = sum(stats["written"] for stats in final_stats(stats_dir).values())
        assert written == sum(logged.values())


def test_reopen_signal_under_gunicorn_preload_is_honoured_or_reported(tmp_path: Path) -> None:
    """Rotated under gunicorn --preload with reopen_signal: the log reopens, or says it cannot."""
    log_path = tmp_path / "access.log"
    options = {"sink": str(log_path), "reopen_signal": int(signal.SIGUSR1)}
    environment = fault_environment(options, tmp_path)
    with running_server(SERVERS["gunicorn --preload"], environment, tmp_path / "out") as server:
        rotate = _logrotate(tmp_path, log_path, "create+signal", server.process.pid)
        with Load(server.port) as load:
            poll_until(lambda: _has_lines(log_path), 30, "lines before the rotation")
            rotate()
            # The handler boundlog installed in the master at import is replaced by
            # gunicorn's own, in the master and again in each worker, before any
            # SIGUSR1 comes.  Writing on to the rotated file is only acceptable if the
            # log says so.
            poll_until(
                lambda: _has_lines(log_path) or "SIGUSR1" in server.output(),
                10,
                "a reopen after logrotate's SIGUSR1, or a warning that it cannot happen",
            )
        assert not load.errors, load.errors[:5]
        assert server.stop() == 0, server.output()
