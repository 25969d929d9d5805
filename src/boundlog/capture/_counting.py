"""The request body's bytes an application reads: a stream wrapper that counts them.

The WSGI middleware (both request paths) wraps ``wsgi.input`` in it, and the
``http.server`` mixin the handler's ``rfile``, for a log that reads ``bytes_received``.
It counts what comes out of the stream however it is read: PEP 3333's ``read``,
``readline``, ``readlines`` and iteration, and the buffered reader's ``read1`` and
``readinto`` that ``http.server`` handlers may use.  Anything else is the stream's own,
looked up on it: the application sees the server's stream, attributes and all.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


class CountingReader:
    """``stream``, counting in ``bytes_read`` the bytes read through it."""

    __slots__ = ("_stream", "bytes_read")

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.bytes_read = 0

    # The size arguments are passed on only when given: a server's stream may take
    # none (PEP 3333 does not require read(-1) or read(None)).
    def read(self, *size: int | None) -> bytes:
        data: bytes = self._stream.read(*size)
        self.bytes_read += len(data)
        return data

    def read1(self, *size: int) -> bytes:
        data: bytes = self._stream.read1(*size)
        self.bytes_read += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        read: int = self._stream.readinto(buffer)
        self.bytes_read += read
        return read

    def readline(self, *size: int | None) -> bytes:
        line: bytes = self._stream.readline(*size)
        self.bytes_read += len(line)
        return line

    def readlines(self, *hint: int) -> list[bytes]:
        lines: list[bytes] = self._stream.readlines(*hint)
        self.bytes_read += sum(map(len, lines))
        return lines

    def __iter__(self) -> Iterator[bytes]:
        for line in self._stream:
            self.bytes_read += len(line)
            yield line

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
