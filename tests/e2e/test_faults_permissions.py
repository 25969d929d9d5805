"""A destination that cannot be opened: at startup a clear error, at reopen the old file.

At construction a missing directory or a denied permission is a ``SinkError`` naming
the path and the reason, and a server importing the application refuses to start with
it.  At reopen time, after rotation moved the file away, the same failure must not cost
a single line: the log keeps writing to the descriptor it has, counts a write error and
warns on stderr, and the next reopen that succeeds switches to the new file.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from _records import make_record
from _servers import (
    REPO_ROOT,
    START_TIMEOUT,
    Load,
    boundlog_warnings,
    fault_environment,
    fault_stats,
    final_stats,
    free_port,
    gunicorn_fault_command,
    load_requests,
    poll_until,
    read_log_lines,
    running_server,
    uvicorn_fault_command,
    wait_settled,
)
from boundlog import AccessLog

NOBODY = 65534
SERVERS: dict[str, Callable[[int], list[str]]] = {
    "uvicorn": uvicorn_fault_command,
    "gunicorn": gunicorn_fault_command("-k", "gthread", "-w", "1"),
}


@pytest.mark.parametrize("server_name", SERVERS)
def test_server_refuses_to_start_when_the_log_directory_is_missing(
    tmp_path: Path, server_name: str
) -> None:
    """The server exits at startup, and its output names the path and the OS reason."""
    log_path = tmp_path / "missing" / "access.log"
    environment = {**os.environ, **fault_environment({"sink": str(log_path)}, tmp_path)}
    started = subprocess.run(
        SERVERS[server_name](free_port()),
        cwd=REPO_ROOT,
        env=environment,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT,
    )
    assert started.returncode != 0
    assert f"SinkError: cannot open {log_path}: No such file or directory" in started.stderr


def test_failed_reopen_in_a_running_server_keeps_every_line(tmp_path: Path) -> None:
    """SIGUSR1 while the path is a directory: lines go on to the old file; the next reopen works."""
    log_path = tmp_path / "access.log"
    rotated = tmp_path / "access.log.1"
    stats_dir = tmp_path / "stats"
    stats_dir.mkdir()
    options = {"sink": str(log_path), "reopen_signal": int(signal.SIGUSR1)}
    environment = fault_environment(options, stats_dir)
    with running_server(uvicorn_fault_command, environment, tmp_path / "out") as server:
        sent = 0

        def send(first_client: int) -> Load:
            nonlocal sent
            with Load(server.port, clients=2, requests=50, first_client=first_client) as load:
                load.join()
            sent += load.total
            wait_settled(server.port, submitted=sent)
            return load

        before = send(0)
        log_path.rename(rotated)
        log_path.mkdir()  # the path cannot be opened as a file: EISDIR
        server.process.send_signal(signal.SIGUSR1)
        poll_until(
            lambda: fault_stats(server.port)["stats"]["write_errors"] == 1,
            10,
            "the writer tries to reopen",
        )
        during = send(10)
        log_path.rmdir()
        server.process.send_signal(signal.SIGUSR1)
        poll_until(log_path.exists, 10, "the writer reopens the path")
        after = send(20)
        server.stop()

    assert set(load_requests(read_log_lines(rotated))) == before.completed | during.completed
    assert set(load_requests(read_log_lines(log_path))) == after.completed
    (final,) = final_stats(stats_dir).values()
    assert (final["written"], final["failed"], final["write_errors"]) == (300, 0, 1), final
    assert boundlog_warnings(server.output()) == [
        f"boundlog: cannot reopen {log_path}, still writing to the old file: Is a directory"
    ]


@pytest.fixture
def unprivileged_directory() -> Iterator[Path]:
    """A directory the unprivileged user (nobody, when run as root) owns and can reach."""
    directory = Path(tempfile.mkdtemp(prefix="boundlog-permissions-"))
    try:
        if os.geteuid() == 0:
            os.chown(directory, NOBODY, NOBODY)
        yield directory
    finally:
        shutil.rmtree(directory)


def test_reopen_denied_keeps_the_old_descriptor_counts_and_warns(
    unprivileged_directory: Path, tmp_path: Path
) -> None:
    """EACCES on reopen: the record still lands in the old file, one write error, one warning."""
    log_path = unprivileged_directory / "access.log"
    rotated = unprivileged_directory / "access.log.1"
    stderr_path = tmp_path / "stderr"
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            # pytest captures descriptor 2; the child's warnings go to a file of its own.
            with stderr_path.open("w") as stderr:
                os.dup2(stderr.fileno(), 2)
            # Root may create files anywhere: the child drops to an unprivileged user.
            if os.geteuid() == 0:
                os.setuid(NOBODY)
            log = AccessLog(str(log_path), flush_interval=0)
            log.submit(make_record(path=b"/before"))
            log.flush(timeout=10)
            log_path.rename(rotated)
            unprivileged_directory.chmod(0o555)  # no new file may be created here
            reopened = log.reopen(timeout=10)
            log.submit(make_record(path=b"/after"))
            stats = log.close()
            os.write(write_end, json.dumps([reopened, stats._asdict()]).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        report = reader.read()
    _, status = os.waitpid(child, 0)
    unprivileged_directory.chmod(0o755)
    assert os.waitstatus_to_exitcode(status) == 0, stderr_path.read_text()
    reopened, stats = json.loads(report)
    assert reopened, "reopen() returns once the writer has tried"
    assert (stats["written"], stats["failed"], stats["write_errors"]) == (2, 0, 1), stats
    assert not log_path.exists()
    assert [line.split(b" ")[6] for line in rotated.read_bytes().splitlines()] == [
        b"/before",
        b"/after",
    ]
    assert stderr_path.read_text() == (
        f"boundlog: cannot reopen {log_path}, still writing to the old file: Permission denied\n"
    )
