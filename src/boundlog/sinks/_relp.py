"""RELP, rsyslog's reliable event logging protocol (imrelp), from the client's side.

Every frame is ``TXNR SP COMMAND SP DATALEN [SP DATA] LF``.  A session opens with an
``open`` command offering ``relp_version=0`` and ``commands=syslog``; each ``syslog``
command carries one message and the server answers each with ``TXNR rsp 6 200 OK``, in
order.  A message is acknowledged once its ``rsp`` arrives: only then is it counted as
written.  A session that breaks loses nothing acknowledged; the messages sent but not
acknowledged are sent again on the next session (so a restart may duplicate them:
delivery is at least once).  The server may end a session with ``0 serverclose 0``.

A session keeps up to ``WINDOW`` messages unacknowledged, as librelp's client does
(its default is 128 frames): ``send`` puts a batch's frames on the wire and takes the
answers already in without waiting, and blocks only while the window is full; ``drain``
waits for every answer (flush, close, an idle writer).  rsyslog answers each frame in a
segment of its own, and its Nagle holds the next answer until the previous one is
acknowledged: while the next batch's frames go out, they carry those acknowledgements,
where a client that waited for each batch's answers before sending more had only its
reads to carry them.
"""

from __future__ import annotations

import contextlib
import re
import select
import socket
import time
from collections.abc import Callable, Sequence

from .. import _core

_OFFERS = b"relp_version=0\nrelp_software=boundlog\ncommands=syslog"
# RFC-like limit of librelp: transaction numbers run from 1 to 999,999,999, then wrap.
_MAX_TXNR = 999_999_999
# The longest frame header an answer may have before its data: a guard against a peer
# that is not a RELP server, whose bytes would otherwise be buffered for ever.
_MAX_HEADER = 64
# Answers carry a status and a few offers; a peer announcing more is not a RELP server
# worth buffering for.
_MAX_ANSWER = 65536
# What rsyslog answers to every message it takes (librelp sends "200 OK" and nothing
# else): a run of these is read by one pass of this pattern rather than the parser of
# any frame, which costs some microseconds an answer on the writer thread.
_PLAIN_OK = re.compile(rb"([0-9]{1,9}) rsp 6 200 OK\n")
#: Messages a session keeps unacknowledged: two of the writer's default batches (512
#: lines), so that a batch goes out while the answers to the one before it are still
#: on their way, and a third waits only for the oldest's.  librelp's default (128)
#: would cut each default batch into four waits.  What it costs: the messages held for
#: sending again after a break (about 300 KiB of typical lines, at most 1024 records'
#: worth), and as many frames in the socket buffers, which hold that many with room.
WINDOW = 1024


#: Linux's TCP_QUICKACK (see RelpSession._quick_ack); None where there is none.
_QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)


class RelpError(ConnectionError):
    """The server refused a command, closed the session or does not speak RELP."""


class Stopped(Exception):
    """close() gave up while a session waited for the server."""


class RelpSession:
    """One connection's transaction numbers, the messages it has in flight and the
    answers read from it."""

    def __init__(
        self, sock: socket.socket, stopped: Callable[[], bool], *, window: int = WINDOW
    ) -> None:
        self._sock = sock
        self._stopped = stopped
        self._window = window
        self._txnr = 0
        self._buffer = bytearray()
        #: Messages sent and not yet acknowledged, the oldest numbered ``_next_answer``.
        self.outstanding = 0
        self._next_answer = 1
        # The plain answers the messages in flight will get (from _plain_at on).
        self._plain = b""
        self._plain_at = 0
        # Only a TCP socket has delayed acknowledgements to turn off (the unit tests
        # speak RELP through socket-like fakes).
        self._quick_acks = (
            _QUICKACK is not None
            and isinstance(sock, socket.socket)
            and sock.family in (socket.AF_INET, socket.AF_INET6)
        )
        if self._quick_acks:
            # A batch goes in one write: Nagle here could only hold back its last
            # segment, whose frames carry the acknowledgements rsyslog's Nagle waits
            # for (local rsyslogd, in-process: 98-123k -> 123-131k lines/s).
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # With the C core, the plain answers are awaited in C without the GIL (see
        # _receive), on a socket of the kernel's (not TLS, not a fake).
        self._await = _core.relp_await if type(sock) is socket.socket else None
        # Whether an answer is in, for a look that must not wait: a socket with a
        # timeout waits for one in recv() whatever its flags say.  The unit tests'
        # fakes have no descriptor, and their recv() honours MSG_DONTWAIT instead.
        self._poller: select.poll | None = None
        if isinstance(sock, socket.socket):
            self._poller = select.poll()
            self._poller.register(sock, select.POLLIN)

    def open(self) -> None:
        """Offer the session; the server must accept it with ``200``."""
        self._command(b"open", _OFFERS)
        number, _ = self._answer(patient=False)
        if number != self._txnr:
            raise RelpError(f"answer {number} to open {self._txnr}")

    def send(self, messages: Sequence[bytes], acknowledged: Callable[[int], None]) -> None:
        """Put ``messages`` in flight, in one write while the window has room for them,
        calling ``acknowledged(n)`` as each run of ``n`` messages in flight (of this call
        or earlier ones) gets its ``200``, in order.

        The call blocks only while the window is full, until the oldest answers make
        room; once the frames are sent, the answers already in are taken without waiting.
        """
        start = 0
        while start < len(messages):
            count = min(len(messages) - start, self._window)
            if self.outstanding + count > self._window:
                self._wait(self._window - count, acknowledged)
            first = self._txnr % _MAX_TXNR + 1
            numbers = _numbers(first, count)
            self._txnr = numbers[-1]
            frames = b"".join([
                b"%d syslog %d %s\n" % (number, len(message), message)
                for number, message in zip(numbers, messages[start : start + count], strict=True)
            ])  # fmt: skip
            self._expect(numbers)
            self._send_all(frames)
            start += count
        self._poll(acknowledged)

    def drain(self, acknowledged: Callable[[int], None]) -> None:
        """Wait for the answers to every message in flight (see ``send``)."""
        self._wait(0, acknowledged)

    def _expect(self, numbers: Sequence[int]) -> None:
        """Note the messages ``numbers`` put in flight."""
        if not self.outstanding:
            self._next_answer = numbers[0]
        plain = _plain_for(numbers)
        self._plain = (
            self._plain[self._plain_at :] + plain if self._plain_at < len(self._plain) else plain
        )
        self._plain_at = 0
        self.outstanding += len(numbers)

    def _resync(self) -> None:
        """The plain answers of the messages still in flight, after an answer in
        another form: the offsets of the ones noted no longer hold."""
        self._plain = _plain_for(_numbers(self._next_answer, self.outstanding))
        self._plain_at = 0

    def _poll(self, acknowledged: Callable[[int], None]) -> None:
        """Take the answers already received, without waiting for more."""
        if self._poller is None or self._poller.poll(0):
            self._quick_ack()
            try:
                chunk = self._sock.recv(65536, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                chunk = None
            if chunk is not None:
                if not chunk:
                    raise RelpError("the server closed the connection")
                self._buffer += chunk
        self._take(acknowledged)

    def _wait(self, most: int, acknowledged: Callable[[int], None]) -> None:
        """Read answers until at most ``most`` messages are in flight."""
        self._take(acknowledged)
        while self.outstanding > most:
            until = None
            if self._await is not None and self._plain.startswith(self._buffer, self._plain_at):
                # The plain answers that bring the count down to ``most``, awaited in C.
                end = self._plain_at + _plain_length(self._next_answer, self.outstanding - most)
                if end > self._plain_at + len(self._buffer):
                    until = end
            self._receive(patient=True, until=until)
            self._take(acknowledged)

    def _take(self, acknowledged: Callable[[int], None]) -> None:
        """Count the whole answers in the buffer, each of a message in flight, in order."""
        while self._buffer:
            taken, self._next_answer = self._plain_answers(self._next_answer, self.outstanding)
            if taken:
                self.outstanding -= taken
                acknowledged(taken)
                continue
            if self._plain.startswith(self._buffer, self._plain_at):
                return  # the start of a plain answer: the rest is still to come
            # An answer in another form: read it whole.
            frame = self._frame()
            if frame is None:
                return
            number, _ = self._accepted(frame)
            if not self.outstanding or number != self._next_answer:
                awaited = self._next_answer if self.outstanding else "none"
                raise RelpError(f"answer {number} where {awaited} was awaited")
            self.outstanding -= 1
            self._next_answer = self._next_answer % _MAX_TXNR + 1
            self._resync()
            acknowledged(1)

    def _plain_answers(self, expected: int, most: int) -> tuple[int, int]:
        """Take up to ``most`` plain ``200 OK`` answers from the start of the buffer,
        numbered from ``expected`` on: how many, and the number awaited next."""
        buffer = self._buffer
        if not buffer:
            return 0, expected
        # The answers rsyslog sends when all goes well are known in advance (_expect):
        # a buffer that begins what they read needs no parsing, only its whole lines
        # counted.  This is most reads; anything else is parsed answer by answer.
        if self._plain.startswith(buffer, self._plain_at):
            end = buffer.rfind(b"\n") + 1
            taken = buffer.count(b"\n", 0, end)
            if taken <= most:
                self._plain_at += end
                del buffer[:end]
                return taken, (expected + taken - 1) % _MAX_TXNR + 1
        match = _PLAIN_OK.match
        position = 0
        taken = 0
        while taken < most and (found := match(buffer, position)) is not None:
            number = int(found[1])
            if number != expected:
                raise RelpError(f"answer {number} where {expected} was awaited")
            expected = expected % _MAX_TXNR + 1
            position = found.end()
            taken += 1
        del buffer[:position]
        self._plain_at += position
        return taken, expected

    def close(self) -> None:
        """Say goodbye, and read the answer as librelp's client does, for one socket
        timeout at most: a server whose answer finds the socket closed reports a broken
        pipe (rsyslog does, once per session)."""
        self._txnr = self._txnr % _MAX_TXNR + 1
        self._sock.send(b"%d close 0\n" % self._txnr)
        timeout = self._sock.gettimeout()
        # A deadline, not only the socket timeout: a server that drips its answer a
        # byte at a time would otherwise hold close() for as long as it drips.
        deadline = None if timeout is None else time.monotonic() + timeout
        with contextlib.suppress(OSError, RelpError):  # TimeoutError is an OSError
            self._answer(patient=False, deadline=deadline)

    def _command(self, command: bytes, data: bytes) -> None:
        self._txnr = self._txnr % _MAX_TXNR + 1
        self._send_all(b"%d %s %d %s\n" % (self._txnr, command, len(data), data))

    def _send_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                sent = self._sock.send(view)
            except TimeoutError:
                if self._stopped():
                    raise Stopped from None
                continue
            view = view[sent:]

    def _answer(self, *, patient: bool, deadline: float | None = None) -> tuple[int, bytes]:
        """The next ``rsp`` frame's number and data; a refusal or anything else raises.

        ``patient``: a timeout is a pause to look whether close() gave up, not an error.
        ``deadline`` (time.monotonic()): no read starts after it (TimeoutError).
        """
        while True:
            frame = self._frame()
            if frame is not None:
                return self._accepted(frame)
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError("no whole answer in time")
            self._receive(patient=patient)

    @staticmethod
    def _accepted(frame: tuple[int, bytes, bytes]) -> tuple[int, bytes]:
        """A frame's number and data if it is a ``200`` answer; anything else raises."""
        number, command, data = frame
        if command == b"serverclose":
            raise RelpError("the server closed the session")
        if command != b"rsp":
            raise RelpError(f"unexpected {command!r} from the server")
        if not data.startswith(b"200"):
            reason = data.split(b"\n", 1)[0].decode("ascii", "replace")
            raise RelpError(f"the server refused: {reason}")
        return number, data

    def _receive(self, *, patient: bool, until: int | None = None) -> None:
        """Add what the server sent next to the buffer (nothing if a patient read
        timed out: the caller looks again).

        ``until``: what is awaited is the plain answers up to this offset of
        ``_plain``, read in one call to the C core that releases the GIL until they are
        all in (or something else came).  rsyslog's answers come two or three a segment (see ``_quick_ack``):
        read in Python, each segment is a read that gives up the GIL and takes it back
        from the event loop, a hundred hand-offs a batch.
        """
        try:
            chunk = self._read() if until is None else self._await_plain(until)
        except TimeoutError:
            if not patient:
                raise
            if self._stopped():
                raise Stopped from None
            return
        if not chunk:
            raise RelpError("the server closed the connection")
        self._buffer += chunk

    def _read(self) -> bytes:
        self._quick_ack()
        return self._sock.recv(65536)

    def _await_plain(self, until: int) -> bytes:
        assert self._await is not None
        expected = self._plain[self._plain_at + len(self._buffer) : until]
        timeout = self._sock.gettimeout()
        milliseconds = -1 if timeout is None else int(timeout * 1000)
        return self._await(self._sock.fileno(), expected, milliseconds)

    def _quick_ack(self) -> None:
        """Acknowledge what arrives at once, not after the kernel's 40 ms delay.

        rsyslog writes each answer on its own, and Nagle's algorithm holds its second
        one until the first is acknowledged: with delayed acknowledgements here, every
        batch waited 40 ms for its answers (11k lines a second to a local rsyslogd,
        4.3 times fewer than with this).  The option does not stay set: the kernel
        turns it off as it goes, so it is asked for before each read.
        """
        if self._quick_acks:
            assert _QUICKACK is not None
            with contextlib.suppress(OSError):
                self._sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)

    def _frame(self) -> tuple[int, bytes, bytes] | None:
        """The first whole frame in the buffer, taken out of it; None if incomplete."""
        buffer = self._buffer
        parts = bytes(buffer[:_MAX_HEADER]).split(b" ", 3)
        if len(parts) < 3 or (len(parts) == 3 and b"\n" not in parts[2]):
            if len(buffer) >= _MAX_HEADER:
                raise RelpError("not a RELP answer")
            return None
        size_field = parts[2].split(b"\n", 1)[0]
        if not (parts[0].isdigit() and size_field.isdigit()):
            raise RelpError("not a RELP answer")
        number = int(parts[0])
        size = int(size_field)
        if size > _MAX_ANSWER:
            raise RelpError(f"an answer of {size} bytes is not a RELP answer")
        start = len(parts[0]) + len(parts[1]) + len(size_field) + 2
        if size == 0:
            end = start
        else:
            start += 1
            end = start + size
        if len(buffer) <= end:
            return None
        if buffer[end] != 0x0A:
            raise RelpError("a RELP frame without its trailer")
        data = bytes(buffer[start:end])
        del buffer[: end + 1]
        return number, parts[1], data


def _numbers(first: int, count: int) -> Sequence[int]:
    """``count`` transaction numbers from ``first`` on, wrapping after 999,999,999."""
    if first + count - 1 <= _MAX_TXNR:
        return range(first, first + count)
    return [(number - 1) % _MAX_TXNR + 1 for number in range(first, first + count)]


def _plain_for(numbers: Sequence[int]) -> bytes:
    """The plain answers to the messages ``numbers``, in order."""
    return b"".join([b"%d rsp 6 200 OK\n" % number for number in numbers])


def _plain_length(first: int, count: int) -> int:
    """The length of the plain answers to ``count`` messages numbered from ``first`` on
    (``N rsp 6 200 OK`` and a newline each), across the number wrap."""
    total = 0
    number = first
    while count:
        digits = len(str(number))
        last = min(10**digits - 1, _MAX_TXNR)
        run = min(count, last - number + 1)
        total += run * (digits + 14)
        count -= run
        number = number + run if number + run <= _MAX_TXNR else 1
    return total
