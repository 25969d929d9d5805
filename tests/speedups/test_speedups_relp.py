"""The C core's wait for RELP's answers (csrc/sinks/relp.c) on real sockets.

It only reads: what it hands back must be exactly what the peer sent, up to the
awaited bytes or the first read that differs from them, never a byte past them, and it
must end on a close, a timeout or a signal's error as socket.recv does.  The parsing
of what it reads is the pure-Python session's (tests/unit/sinks/test_relp.py).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boundlog import _core

pytestmark = pytest.mark.skipif(
    _core.speedups is None, reason=f"the C core is not in use ({_core.description})"
)

ANSWERS = b"".join(b"%d rsp 6 200 OK\n" % number for number in range(1, 41))


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        yield ours, theirs


def relp_await(sock: socket.socket, expected: bytes, timeout_ms: int = 5000) -> bytes:
    assert _core.relp_await is not None
    return _core.relp_await(sock.fileno(), expected, timeout_ms)


def send_in_pieces(sock: socket.socket, data: bytes, cuts: list[int]) -> threading.Thread:
    ends = sorted({cut % (len(data) + 1) for cut in cuts} | {len(data)})

    def send() -> None:
        start = 0
        for end in ends:
            sock.sendall(data[start:end])
            start = end

    thread = threading.Thread(target=send)
    thread.start()
    return thread


@given(cuts=st.lists(st.integers(0, 10_000), max_size=20))
def test_the_answers_awaited_come_back_whole_however_they_are_sent(cuts: list[int]) -> None:
    """Sent in any pieces, the awaited bytes come back in one call, all of them."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        sender = send_in_pieces(theirs, ANSWERS, cuts)
        assert relp_await(ours, ANSWERS) == ANSWERS
        sender.join()


@given(at=st.integers(0, len(ANSWERS) - 1), cuts=st.lists(st.integers(0, 10_000), max_size=8))
def test_what_differs_is_handed_back_at_the_first_read_that_shows_it(
    at: int, cuts: list[int]
) -> None:
    """An answer in another form ends the wait: what came is a prefix of what was sent,
    it differs from the awaited bytes, and nothing past the awaited length is taken."""
    sent = ANSWERS[:at] + b"X" + ANSWERS[at + 1 :]
    ours, theirs = socket.socketpair()
    with ours, theirs:
        sender = send_in_pieces(theirs, sent, cuts)
        got = relp_await(ours, ANSWERS)
        sender.join()
        assert len(got) > at
        assert sent.startswith(got)
        rest = b""
        while len(got) + len(rest) < len(sent):
            rest += ours.recv(65536)
        assert got + rest == sent


def test_nothing_past_the_awaited_bytes_is_read(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """What follows the batch's answers stays in the socket for the next read."""
    ours, theirs = pair
    theirs.sendall(ANSWERS + b"0 serverclose 0\n")
    assert relp_await(ours, ANSWERS) == ANSWERS
    assert ours.recv(65536) == b"0 serverclose 0\n"


def test_a_close_hands_back_what_came_then_nothing(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """The server closing mid-batch: the answers it sent, then b"" as recv says it."""
    ours, theirs = pair
    theirs.sendall(ANSWERS[:100])
    theirs.shutdown(socket.SHUT_WR)
    assert relp_await(ours, ANSWERS) == ANSWERS[:100]
    assert relp_await(ours, ANSWERS[100:]) == b""


def test_silence_is_a_timeout(pair: tuple[socket.socket, socket.socket]) -> None:
    """No byte for the timeout: TimeoutError, as a socket with a timeout raises."""
    ours, _ = pair
    with pytest.raises(TimeoutError):
        relp_await(ours, ANSWERS, timeout_ms=1)


def test_a_closed_descriptor_is_an_os_error() -> None:
    """A read that fails says why."""
    ours, theirs = socket.socketpair()
    theirs.close()
    descriptor = ours.detach()
    socket.close(descriptor)
    assert _core.relp_await is not None
    with pytest.raises(OSError, match="Bad file descriptor"):
        _core.relp_await(descriptor, ANSWERS, 1000)


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ((-1, ANSWERS, 10), ValueError),
        ((0, b"", 10), ValueError),
        ((0, ANSWERS, -2), ValueError),
        (("0", ANSWERS, 10), TypeError),
        ((0, "answers", 10), TypeError),
    ],
)
def test_bad_arguments_are_refused(args: tuple[object, ...], error: type[Exception]) -> None:
    """The session calls it right; anything else is refused, not read from."""
    assert _core.relp_await is not None
    with pytest.raises(error):
        _core.relp_await(*args)  # type: ignore[arg-type]
