"""Sinks: what each destination accepts, and how batches reach pipes whole."""

from __future__ import annotations

import io
import os
import threading
from pathlib import Path

import pytest

from _records import make_record
from boundlog import AccessLog, ConfigurationError
from boundlog.sinks._files import PIPE_BUF, open_sink


def _read_all(fd: int, into: list[bytes]) -> None:
    while chunk := os.read(fd, 1 << 20):
        into.append(chunk)


def test_file_sink_appends_and_creates(tmp_path: Path) -> None:
    """A path is created if missing and appended to, never truncated."""
    path = tmp_path / "access.log"
    path.write_bytes(b"earlier line\n")
    with AccessLog(str(path)) as log:
        log.submit(make_record())
    lines = path.read_bytes().splitlines()
    assert lines[0] == b"earlier line"
    assert len(lines) == 2


@pytest.mark.parametrize("spec", ["stdout", "-", "stderr"])
def test_standard_streams_are_borrowed(spec: str, capfd: pytest.CaptureFixture[str]) -> None:
    """stdout/stderr receive the lines and stay open after close()."""
    with AccessLog(spec) as log:
        log.submit(make_record(path=b"/std"))
    out, err = capfd.readouterr()
    written = err if spec == "stderr" else out
    assert '"GET /std HTTP/1.1" 200 1024' in written
    os.fstat(2 if spec == "stderr" else 1)


def test_file_descriptor_and_file_object_sinks_are_not_closed(tmp_path: Path) -> None:
    """An int descriptor or a binary file object is written to and left open for its owner."""
    path = tmp_path / "access.log"
    with open(path, "ab") as owned:
        owned.write(b"buffered first\n")
        with AccessLog(owned) as log:
            log.submit(make_record())
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        with AccessLog(fd) as log:
            log.submit(make_record())
        os.fstat(fd)
        os.close(fd)
        assert not owned.closed
    lines = path.read_bytes().splitlines()
    assert lines[0] == b"buffered first"
    assert len(lines) == 3


def test_an_object_without_fileno_is_a_configuration_error() -> None:
    """A BytesIO has no descriptor: the error says what a sink can be."""
    with pytest.raises(ConfigurationError, match="a binary file object with fileno"):
        open_sink(io.BytesIO())  # type: ignore[arg-type]


@pytest.mark.parametrize("line_length", [80, 1000, PIPE_BUF - 1, PIPE_BUF, PIPE_BUF + 1, 20_000])
def test_pipe_writes_hold_whole_lines_within_pipe_buf(line_length: int) -> None:
    """On a pipe, every write carries whole lines, at most PIPE_BUF unless one line is longer."""
    read_end, write_end = os.pipe()
    sink = open_sink(write_end)
    assert sink.is_pipe
    line = b"x" * (line_length - 1) + b"\n"
    data = line * 10
    writes: list[int] = []
    real_write = os.write

    # Record the size of each write system call the sink makes.
    def spy(fd: int, chunk: bytes | memoryview) -> int:
        written = real_write(fd, chunk)
        writes.append(written)
        return written

    chunks: list[bytes] = []
    reader = threading.Thread(target=_read_all, args=(read_end, chunks))
    reader.start()
    os.write, saved = spy, os.write  # type: ignore[assignment]
    try:
        assert sink.write(data) == (len(data), None)
    finally:
        os.write = saved
    os.close(write_end)
    reader.join()
    os.close(read_end)
    assert b"".join(chunks) == data
    offset = 0
    for size in writes:
        assert data[offset + size - 1 : offset + size] == b"\n", "a write ended mid-line"
        assert size <= max(PIPE_BUF, line_length)
        offset += size


def test_broken_pipe_is_reported_not_raised() -> None:
    """A pipe whose reader is gone yields the error, with nothing written."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    sink = open_sink(write_end)
    written, error = sink.write(b"line\n")
    assert written == 0
    assert isinstance(error, BrokenPipeError)
    os.close(write_end)
