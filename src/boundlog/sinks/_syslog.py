"""RFC 5424 messages, and the framings the network sinks send them in.

A batch arrives as newline-terminated lines (whatever the format); each line becomes the
MSG of one syslog message, without its newline.  Every message of a batch shares one
header: the fields are the same for the whole batch but the time, and a time per batch
(when it was framed) costs one clock read instead of one per line; the request's own
time is in the line.

Each framing also says where every line ends in the batch and where its frame ends in
what is sent, so that a sink can tell how many whole lines went out when it stopped
half-way (``ends``), and resend from the first line that did not.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Callable
from itertools import accumulate

from .._errors import ConfigurationError

FACILITIES = {
    "kern": 0, "user": 1, "mail": 2, "daemon": 3, "auth": 4, "syslog": 5, "lpr": 6,
    "news": 7, "uucp": 8, "cron": 9, "authpriv": 10, "ftp": 11, "ntp": 12, "security": 13,
    "console": 14, "solaris-cron": 15, "local0": 16, "local1": 17, "local2": 18,
    "local3": 19, "local4": 20, "local5": 21, "local6": 22, "local7": 23,
}  # fmt: skip
SEVERITIES = {
    "emerg": 0, "alert": 1, "crit": 2, "err": 3, "warning": 4, "notice": 5, "info": 6,
    "debug": 7,
}  # fmt: skip

# RFC 5424 6.2: the longest HOSTNAME, APP-NAME and PROCID.
_MAX_HOSTNAME = 255
_MAX_APP_NAME = 48


def code(name: str, value: object, names: dict[str, int]) -> int:
    """The number of a facility or severity given by name or number."""
    if isinstance(value, str) and value.lower() in names:
        return names[value.lower()]
    if isinstance(value, int) and not isinstance(value, bool) and value in names.values():
        return value
    raise ConfigurationError(
        f"unknown {name} {value!r}: choose one of {', '.join(names)} "
        f"(or their numbers, 0 to {max(names.values())})"
    )


def header_field(name: str, value: object, limit: int) -> str:
    """``value`` if it is a valid header field: printable US-ASCII, no space, not too long."""
    if (
        not isinstance(value, str)
        or not 0 < len(value) <= limit
        or not all(33 <= ord(c) <= 126 for c in value)
    ):
        raise ConfigurationError(
            f"{name} must be 1 to {limit} printable ASCII characters without spaces "
            f"(RFC 5424), not {value!r}"
        )
    return value


def clean_field(value: str, limit: int) -> str:
    """A field made from what the system says (its host name, the program's): cut to fit."""
    kept = "".join(c for c in value if 33 <= ord(c) <= 126)[:limit]
    return kept or "-"


def default_app_name() -> str:
    """The program's name: ``gunicorn``, or ``uvicorn`` for ``python -m uvicorn``."""
    argv0 = sys.argv[0] if getattr(sys, "argv", None) else ""
    name = os.path.basename(argv0)
    if name == "__main__.py":
        name = os.path.basename(os.path.dirname(argv0))
    name = name.removesuffix(".py")
    return clean_field(name or "python", _MAX_APP_NAME)


def default_hostname() -> str:
    """This machine's name as the system gives it."""
    return clean_field(socket.gethostname(), _MAX_HOSTNAME)


class Syslog:
    """Makes RFC 5424 headers: ``<PRI>1 TIMESTAMP HOSTNAME APP-NAME PROCID - - ``."""

    def __init__(self, *, facility: int, severity: int, hostname: str, app_name: str) -> None:
        self._start = f"<{facility * 8 + severity}>1 "
        self._rest = f" {hostname} {app_name} "
        self._clock: Callable[[], float] = time.time

    def header(self) -> bytes:
        """The header for a batch framed now, by this process (PROCID is read each time:
        a forked child sends its own)."""
        now = self._clock()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now))
        micros = int(now % 1 * 1_000_000)
        return f"{self._start}{stamp}.{micros:06d}Z{self._rest}{os.getpid()} - - ".encode("ascii")


def line_ends(data: bytes) -> list[int]:
    """The offset just past each newline of ``data``."""
    ends = []
    at = data.find(b"\n")
    while at >= 0:
        ends.append(at + 1)
        at = data.find(b"\n", at + 1)
    return ends


def octet_counted(
    header: bytes, data: bytes, limit: int
) -> tuple[bytes, list[int], list[int], int]:
    """RFC 6587 3.4.1 frames (``MSG-LEN SP SYSLOG-MSG``), one per line, joined, each
    message at most ``limit`` bytes.

    Returns the frames, the end of each frame in them, the end of each line in ``data``,
    and how many messages were cut.  A trailing piece without a newline is a line too.

    Cut here because a collector does not drop what is past its own limit: rsyslog
    reads it as the next message, and a client whose request makes the line long
    could then write a whole syslog message of its choosing into the collector.
    """
    lines = data.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    size = len(header)
    room = max(limit - size, 0)
    frames = []
    frame_ends = []
    data_ends = []
    sent = 0
    read = 0
    cut = 0
    for line in lines:
        read += len(line) + 1
        if len(line) > room:
            line = _cut(line, room)
            cut += 1
        frame = b"%d %s%s" % (size + len(line), header, line)
        frames.append(frame)
        sent += len(frame)
        frame_ends.append(sent)
        data_ends.append(min(read, len(data)))
    return b"".join(frames), frame_ends, data_ends, cut


def _cut(line: bytes, room: int) -> bytes:
    """``line`` cut to ``room`` bytes, never inside a UTF-8 sequence: a reader that
    decodes the message would refuse the whole of it over its last character."""
    end = room
    while end > 0 and 0x80 <= line[end] <= 0xBF:
        end -= 1
    return line[:end]


def datagrams(header: bytes, data: bytes, limit: int | None) -> tuple[list[bytes], list[int], int]:
    """One message per line, each at most ``limit`` bytes (None: any length); and the
    line ends, and how many were cut (see ``_cut``)."""
    lines = data.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    if limit is None:
        # RELP's messages, never cut: what the loop below gives then, without its
        # per-line tests (a third of the time, on every RELP batch).
        ends = list(accumulate([len(line) + 1 for line in lines]))
        if ends and ends[-1] > len(data):  # a last line without its newline
            ends[-1] = len(data)
        return [header + line for line in lines], ends, 0
    room = max(limit - len(header), 0)
    messages = []
    ends = []
    cut = 0
    read = 0
    for line in lines:
        read += len(line) + 1
        ends.append(min(read, len(data)))
        if len(line) > room:
            line = _cut(line, room)
            cut += 1
        messages.append(header + line)
    return messages, ends, cut
