"""Several processes: a log made before fork, and workers sharing one destination.

With ``--preload`` gunicorn imports the application, and so creates the log and its
writer thread, in the master; every worker is a fork of it.  A record submitted in the
master at import waits in the master's queue while the workers are forked, and
``--max-requests`` makes the master fork replacements all through the run: the record
must be written once (by the master, at its exit), each worker must log its own
requests, and nothing may deadlock.

Without ``--preload`` each worker builds its own log; all of them append to one file,
or write to one stdout pipe, at once.  O_APPEND keeps writes to the file from
overwriting each other, and writes of at most PIPE_BUF bytes of whole lines keep them
from interleaving in the pipe: every line must come out whole.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

import pytest

from _servers import (
    Load,
    PipeReader,
    fault_environment,
    final_stats,
    gunicorn_fault_command,
    load_requests,
    poll_until,
    read_log_lines,
    running_server,
    running_server_with_stdout,
)

MARKER = "/submitted-in-the-master-before-fork"
PRELOAD_WORKERS = 3
SHARING_WORKERS = 4


def test_preloaded_log_is_forked_safely_into_recycled_workers(tmp_path: Path) -> None:
    """Every worker, first or recycled, logs its own requests; nothing twice, no deadlock."""
    log_path = tmp_path / "access.log"
    stats_dir = tmp_path / "stats"
    stats_dir.mkdir()
    # A window this long keeps the master's record queued until its log closes at exit.
    options = {"sink": str(log_path), "flush_interval": 3600}
    environment = fault_environment(options, stats_dir, marker=MARKER)
    command = gunicorn_fault_command(
        "--preload", "-k", "sync", "-w", str(PRELOAD_WORKERS), "--max-requests", "100"
    )
    with running_server(command, environment, tmp_path / "out") as server:
        with Load(server.port, clients=6) as load:
            # Recycled workers: twice as many processes as run at once.
            poll_until(
                lambda: load.total >= 600 and len(load.serving_pids()) >= 2 * PRELOAD_WORKERS,
                60,
                "workers recycled",
            )
        assert not load.errors, load.errors[:5]
        assert server.stop() == 0, server.output()
    assert "boundlog:" not in server.output(), server.output()

    lines = read_log_lines(log_path)
    marker_lines = [line for line in lines if MARKER.encode() in line]
    assert len(marker_lines) == 1, f"the master's record was written {len(marker_lines)} times"
    logged = load_requests([line for line in lines if MARKER.encode() not in line])
    assert max(logged.values()) == 1, "a record was written twice"
    assert set(logged) == load.completed

    stats = final_stats(stats_dir)
    master = stats.pop(server.process.pid)
    assert (master["submitted"], master["written"]) == (1, 1), master
    served = Counter(load.pids.values())
    for pid, count in served.items():
        assert pid in stats, f"worker {pid} served {count} requests but never closed its log"
        assert stats[pid]["submitted"] == stats[pid]["written"] == count, (pid, stats[pid])
    assert sum(worker["written"] for worker in stats.values()) == len(load.completed)


def _user_agent(client: int) -> bytes:
    # Lines of different lengths, a few KiB per client, so that batches cross PIPE_BUF;
    # Connection: close spreads the requests over every worker.
    return b"Connection: close\r\nUser-Agent: " + b"%d" % client * (client * 400 + 1) + b"\r\n"


@pytest.mark.parametrize("destination", ["file", "pipe"])
def test_workers_sharing_one_destination_write_whole_lines(
    tmp_path: Path, destination: str
) -> None:
    """4 workers logging at once to one file or one stdout pipe: every line parses, once."""
    log_path = tmp_path / "access.log"
    stats_dir = tmp_path / "stats"
    stats_dir.mkdir()
    sink = str(log_path) if destination == "file" else "stdout"
    environment = fault_environment({"sink": sink}, stats_dir)
    command = gunicorn_fault_command("-k", "gthread", "--threads", "2", "-w", str(SHARING_WORKERS))
    with PipeReader() as pipe:
        stdout = pipe.write_fd if destination == "pipe" else subprocess.DEVNULL
        with running_server_with_stdout(command, environment, tmp_path / "out", stdout) as server:
            pipe.close_write_end()
            with Load(server.port, clients=8, headers=_user_agent) as load:
                poll_until(
                    lambda: load.total >= 2000 and len(load.serving_pids()) == SHARING_WORKERS,
                    60,
                    "every worker serves",
                )
            assert not load.errors, load.errors[:5]
            assert server.stop() == 0, server.output()
        pipe.wait_closed()
        lines = read_log_lines(log_path) if destination == "file" else pipe.lines()
    assert "boundlog:" not in server.output(), server.output()

    logged = load_requests(lines)
    assert max(logged.values()) == 1, "a record was written twice"
    assert set(logged) == load.completed
    stats = final_stats(stats_dir)
    assert len(stats) == SHARING_WORKERS
    assert sum(worker["written"] for worker in stats.values()) == len(lines)
