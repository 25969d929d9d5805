"""RELP against a scripted server: only acknowledged records count as written, and the
unacknowledged ones are sent again after a reconnect."""

from __future__ import annotations

import itertools
import os
import re
import socket
import threading
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from _collectors import submit_paths
from _helpers import wait_until
from boundlog import AccessLog, NetworkSink, Stats
from boundlog.sinks._relp import _MAX_TXNR, RelpError, RelpSession, Stopped, _plain_length

FAST = {"retry_initial": 0.01, "retry_max": 0.1}
_FRAME = re.compile(rb"(\d+) (\w+) (\d+)[ \n]")


class ScriptedRelpServer:
    """A RELP server that answers every ``open``, and each ``syslog`` as ``decide`` says:
    ``"ack"``, ``"drop"`` (close the connection without answering), ``"silent"`` or
    ``"late"`` (answered once ``release`` is set; the frames after it wait meanwhile)
    or ``"late drop"`` (dropped once ``release`` is set)."""

    def __init__(self, decide: Callable[[int, bytes], str]) -> None:
        self._decide = decide
        self.release = threading.Event()
        self.messages: list[bytes] = []
        self.sessions = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.sessions += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buffer = b""
        with conn:
            while True:
                match = _FRAME.match(buffer)
                if match is None or len(buffer) < match.end() + int(match[3]):
                    try:
                        chunk = conn.recv(65536)
                    except OSError:
                        return
                    if not chunk:
                        return
                    buffer += chunk
                    continue
                number, command, size = match[1], match[2], int(match[3])
                start = match.end() if size else match.end() - 1
                data = buffer[start : start + size]
                buffer = buffer[start + size + 1 :]
                if command == b"open":
                    offers = b"200 OK\nrelp_version=0\ncommands=syslog"
                    conn.sendall(b"%s rsp %d %s\n" % (number, len(offers), offers))
                    continue
                if command == b"close":
                    conn.sendall(b"%s rsp 0\n" % number)
                    return
                with self._lock:
                    self.messages.append(data)
                    count = len(self.messages)
                decision = self._decide(count, data)
                if decision.startswith("late"):
                    self.release.wait()
                    decision = decision[5:] or "ack"
                if decision == "drop":
                    return
                if decision == "ack":
                    try:
                        conn.sendall(b"%s rsp 6 200 OK\n" % number)
                    except OSError:
                        return  # the client left while a late answer was held

    def paths(self) -> list[bytes]:
        with self._lock:
            return [re.search(rb'"GET (\S+) ', m)[1] for m in self.messages]  # type: ignore[index]

    def close(self) -> None:
        self._listener.close()


def _send_and_close(
    server: ScriptedRelpServer, prefix: str, count: int, timeout: float, batch_size: int = 512
) -> Stats:
    """``count`` records to the server in batches of ``batch_size``, then close(timeout)."""
    try:
        log = AccessLog(
            NetworkSink(f"relp://127.0.0.1:{server.port}", **FAST),
            flush_interval=3600,
            batch_size=batch_size,
        )
        submit_paths(log, prefix, count)
        return log.close(timeout=timeout)
    finally:
        server.close()


def test_unacknowledged_records_are_sent_again_after_a_reconnect() -> None:
    """The server drops the connection in the middle of a batch: what it did not answer
    goes again on the next session, and everything ends up written."""
    server = ScriptedRelpServer(lambda count, _: "drop" if count == 30 else "ack")
    stats = _send_and_close(server, "r", 50, timeout=30)
    assert stats.written == 50
    assert stats.failed == 0
    assert server.sessions == 2
    paths = server.paths()
    # The 30th was received but not answered: sent again, first on the new session.
    assert paths[:30] == [b"/r/%d" % i for i in range(30)]
    assert paths[30:] == [b"/r/%d" % i for i in range(29, 50)]


def test_frames_of_several_batches_in_flight_are_sent_again_after_a_reconnect() -> None:
    """In batches of 10, several are in flight when the server drops the connection:
    each record is counted written once, though some go twice."""
    server = ScriptedRelpServer(lambda count, _: "drop" if count == 30 else "ack")
    stats = _send_and_close(server, "b", 50, timeout=30, batch_size=10)
    assert (stats.written, stats.failed, stats.queued) == (50, 0, 0)
    assert server.sessions == 2
    paths = server.paths()
    assert paths[:30] == [b"/b/%d" % i for i in range(30)]
    # The next session starts with the oldest message not acknowledged: the 30th, or
    # earlier if the reset took answers the client had not read yet.
    again = paths[30:]
    first = int(again[0].rsplit(b"/", 1)[1])
    assert first <= 29
    assert again == [b"/b/%d" % i for i in range(first, 50)]


@pytest.mark.parametrize("batch_size", [512, 5])
def test_only_acknowledged_records_count_as_written(batch_size: int) -> None:
    """A server that stops answering after 10: close gives up, the 10 are written, the
    rest failed, though the server received them, whether in one batch or in five
    batches in flight at once: each record counted once."""
    server = ScriptedRelpServer(lambda count, _: "ack" if count <= 10 else "silent")
    stats = _send_and_close(server, "s", 25, timeout=1, batch_size=batch_size)
    assert stats.written == 10
    assert stats.failed == 15
    assert stats.submitted == stats.written + stats.failed
    assert len(server.paths()) == 25


def test_flush_waits_for_the_answers() -> None:
    """write() returns before the answers, but flush() waits for them: until the server
    answers, nothing counts as written, nor as failed."""
    server = ScriptedRelpServer(lambda count, _: "late")
    try:
        log = AccessLog(
            NetworkSink(f"relp://127.0.0.1:{server.port}", **FAST),
            flush_interval=3600,
            batch_size=4,
        )
        submit_paths(log, "f", 10)
        assert not log.flush(timeout=0.5)
        held = log.stats()
        assert (held.written, held.failed, held.queued) == (0, 0, 0)
        server.release.set()
        assert log.flush(timeout=30)
        assert log.stats().written == 10
        stats = log.close(timeout=30)
        assert (stats.written, stats.failed) == (10, 0)
    finally:
        server.release.set()
        server.close()


def test_an_idle_writer_counts_the_answers_without_a_flush() -> None:
    """No record follows the last batch: the writer waits for its answers by itself,
    and the counters show it written without a flush()."""
    server = ScriptedRelpServer(lambda count, _: "ack")
    try:
        log = AccessLog(NetworkSink(f"relp://127.0.0.1:{server.port}", **FAST))
        submit_paths(log, "i", 10)
        wait_until(lambda: log.stats().written == 10, timeout=30)
        stats = log.close(timeout=30)
        assert (stats.written, stats.failed) == (10, 0)
    finally:
        server.close()


def test_a_forked_child_neither_resends_nor_counts_the_parents_messages_in_flight() -> None:
    """Forked while the parent's messages await their answers, the child opens its own
    session with only its own records; the parent's are answered and counted in the
    parent, once."""
    server = ScriptedRelpServer(lambda _, data: "ack" if b"/child/" in data else "late")
    try:
        log = AccessLog(NetworkSink(f"relp://127.0.0.1:{server.port}", **FAST))
        submit_paths(log, "parent", 3)
        assert not log.flush(timeout=0.5)  # in flight, unanswered
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child reports by exit status
            ok = False
            try:
                submit_paths(log, "child", 1)
                stats = log.close(timeout=30)
                ok = (stats.submitted, stats.written, stats.failed) == (1, 1, 0)
            finally:
                os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        server.release.set()
        stats = log.close(timeout=30)
        assert (stats.submitted, stats.written, stats.failed) == (3, 3, 0)
        assert sorted(server.paths()) == [b"/child/0", b"/parent/0", b"/parent/1", b"/parent/2"]
    finally:
        server.release.set()
        server.close()


def test_a_sink_that_fails_to_settle_loses_nothing_uncounted(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """A defect in waiting for the answers is reported and tried again; one that never
    ends leaves the unanswered records failed when the writer ends, each counted once."""
    server = ScriptedRelpServer(lambda count, _: "ack")
    original = NetworkSink.settle
    calls = 0

    def settle_once_broken(sink: NetworkSink) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("a defect")
        original(sink)

    monkeypatch.setattr(NetworkSink, "settle", settle_once_broken)
    try:
        log = AccessLog(NetworkSink(f"relp://127.0.0.1:{server.port}", **FAST))
        submit_paths(log, "d", 5)
        assert log.flush(timeout=30)
        stats = log.close(timeout=30)
        assert (stats.written, stats.failed) == (5, 0)
    finally:
        server.close()
    assert "unexpected error waiting for relp://" in capfd.readouterr().err

    held = ScriptedRelpServer(lambda count, _: "late")

    def broken(sink: NetworkSink) -> None:
        raise RuntimeError("a defect")

    monkeypatch.setattr(NetworkSink, "settle", broken)
    try:
        log = AccessLog(NetworkSink(f"relp://127.0.0.1:{held.port}", **FAST))
        submit_paths(log, "n", 5)
        stats = log.close(timeout=30)
        assert (stats.submitted, stats.written, stats.failed) == (5, 0, 5)
    finally:
        held.release.set()
        held.close()


def _lines(prefix: str, numbers: range) -> bytes:
    return b"".join(b'x "GET /%s/%d HTTP/1.1" 200\n' % (prefix.encode(), i) for i in numbers)


def test_the_sink_hands_batches_over_before_their_answers_and_sends_them_again() -> None:
    """Two batches go out with no answer yet; the session breaks on the twentieth:
    settle() sends all twenty again on a new session, and only then are they confirmed."""
    server = ScriptedRelpServer(
        lambda count, _: "late drop" if count == 20 else "silent" if count < 20 else "ack"
    )
    sink = NetworkSink(f"relp://127.0.0.1:{server.port}", **FAST)
    try:
        assert sink.confirms_later
        assert sink.write(_lines("t", range(10))) == (len(_lines("t", range(10))), None)
        assert sink.write(_lines("t", range(10, 20)))[1] is None
        assert sink.confirmed == 0
        server.release.set()
        sink.settle()
        assert sink.confirmed == 20
        assert server.sessions == 2
        assert server.paths() == [b"/t/%d" % i for i in range(20)] * 2
        assert sink.retries == 1
    finally:
        server.release.set()
        sink.close()
        server.close()


class _FakeSocket:
    def __init__(self, answers: bytes) -> None:
        self._answers = answers
        self.sent = b""

    def send(self, data: bytes | memoryview) -> int:
        self.sent += bytes(data)
        return len(data)

    def recv(self, size: int, flags: int = 0) -> bytes:
        if flags & socket.MSG_DONTWAIT and not self._answers:
            raise BlockingIOError
        chunk, self._answers = self._answers[:size], self._answers[size:]
        return chunk

    def gettimeout(self) -> float | None:
        return None


def _exchange(
    session: RelpSession, messages: list[bytes], acknowledged: Callable[[int], None]
) -> None:
    """Put ``messages`` in flight and wait for every answer."""
    session.send(messages, acknowledged)
    session.drain(acknowledged)


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        (b"1 rsp 6 200 OK\n2 rsp 9 500 error\n", "the server refused: 500 error"),
        (b"1 rsp 6 200 OK\n0 serverclose 0\n", "the server closed the session"),
        (b"1 rsp 6 200 OK\n3 rsp 6 200 OK\n", "answer 3 where 2 was awaited"),
        (b"1 rsp 6 200 OK\n3 rsp 06 200 OK\n", "answer 3 where 2 was awaited"),
        (b"1 rsp 6 200 OK\n", "the server closed the connection"),
        (b"1 rsp 6 200 OKX", "without its trailer"),
        (b"HTTP/1.1 400 Bad Request\r\n" * 4, "not a RELP answer"),
        (b"1 rsp 99999999 200 OK", "an answer of 99999999 bytes"),
        (b"1 rsp six 200 OK\n", "not a RELP answer"),
        (b"1 syslog 2 hi\n", "unexpected b'syslog' from the server"),
    ],
)
def test_a_wrong_answer_breaks_the_session(answers: bytes, message: str) -> None:
    """Refusals, a serverclose, answers out of order or not RELP at all are errors."""
    fake = _FakeSocket(answers)
    session = RelpSession(fake, lambda: False)  # type: ignore[arg-type]
    with pytest.raises(RelpError, match=message):
        _exchange(session, [b"one", b"two"], lambda count: None)


def test_an_answer_to_nothing_in_flight_breaks_the_session() -> None:
    """An answer when no message awaits one is not RELP as a server speaks it."""
    session = RelpSession(_FakeSocket(b"5 rsp 6 200 OK\n"), lambda: False)  # type: ignore[arg-type]
    with pytest.raises(RelpError, match="answer 5 where none was awaited"):
        session.send([], lambda count: None)


def test_frames_are_as_librelp_writes_them() -> None:
    """open offers version 0 and the syslog command; a message is TXNR syslog LEN DATA."""
    fake = _FakeSocket(b"1 rsp 6 200 OK\n2 rsp 6 200 OK\n")
    session = RelpSession(fake, lambda: False)  # type: ignore[arg-type]
    session.open()
    acknowledged: list[int] = []
    _exchange(session, [b"<190>1 - h a 1 - - hello"], acknowledged.append)
    session.close()
    assert fake.sent == (
        b"1 open 53 relp_version=0\nrelp_software=boundlog\ncommands=syslog\n"
        b"2 syslog 24 <190>1 - h a 1 - - hello\n"
        b"3 close 0\n"
    )
    assert acknowledged == [1]


def test_an_answer_split_across_reads_and_a_padded_length_are_read() -> None:
    """Frames arrive in any pieces; a length written with a leading zero still counts."""

    class Trickle(_FakeSocket):
        def recv(self, size: int, flags: int = 0) -> bytes:
            return super().recv(1, flags)

    fake = Trickle(b"1 rsp 06 200 OK\n2 rsp 6 200 OK\n")
    acknowledged: list[int] = []
    _exchange(RelpSession(fake, lambda: False), [b"one", b"two"], acknowledged.append)  # type: ignore[arg-type]
    assert acknowledged == [1, 1]


def test_runs_of_plain_answers_and_answers_in_other_forms_are_all_counted() -> None:
    """rsyslog's "200 OK" answers, read many at a time, and any other well-formed answer
    between them (a padded length, offers), are each acknowledged once, in order."""
    answers = (
        b"".join(b"%d rsp 6 200 OK\n" % number for number in range(1, 301))
        + b"301 rsp 06 200 OK\n"
        + b"302 rsp 9 200 OK\nxy\n"
        + b"".join(b"%d rsp 6 200 OK\n" % number for number in range(303, 401))
    )
    fake = _FakeSocket(answers)
    acknowledged: list[int] = []
    _exchange(
        RelpSession(fake, lambda: False),  # type: ignore[arg-type]
        [b"message %d" % number for number in range(400)],
        acknowledged.append,
    )
    assert sum(acknowledged) == 400
    assert 1 in acknowledged  # the two answers in another form, one at a time
    assert len(acknowledged) < 400  # the plain ones in runs


@given(
    count=st.integers(1, 40),
    before_wrap=st.integers(0, 45),
    padded=st.sets(st.integers(0, 39), max_size=3),
    cuts=st.lists(st.integers(1, 2000), max_size=12),
)
def test_answers_in_any_pieces_across_the_number_wrap_are_each_counted_once(
    count: int, before_wrap: int, padded: set[int], cuts: list[int]
) -> None:
    """However the answers are cut into reads, and whichever of them are in another form,
    every message is acknowledged once, in order, numbers wrapping from 999,999,999 to 1."""
    start = _MAX_TXNR - before_wrap
    numbers = [(start + offset) % _MAX_TXNR + 1 for offset in range(count)]
    answers = b"".join(
        b"%d rsp 06 200 OK\n" % number if index in padded else b"%d rsp 6 200 OK\n" % number
        for index, number in enumerate(numbers)
    )
    ends = sorted({min(cut, len(answers)) for cut in cuts} | {len(answers)})

    class Pieces(_FakeSocket):
        def recv(self, size: int, flags: int = 0) -> bytes:
            taken = len(answers) - len(self._answers)
            end = next((end for end in ends if end > taken), taken)
            return super().recv(min(size, end - taken), flags)

    fake = Pieces(answers)
    session = RelpSession(fake, lambda: False)  # type: ignore[arg-type]
    session._txnr = start
    acknowledged: list[int] = []
    _exchange(session, [b"m%d" % index for index in range(count)], acknowledged.append)
    assert sum(acknowledged) == count
    assert all(run > 0 for run in acknowledged)
    assert [int(frame.split()[0]) for frame in fake.sent.splitlines()] == numbers
    # Nothing read beyond the batch's answers, nothing left over.
    assert fake._answers == b""


@given(
    window=st.integers(1, 8),
    batches=st.lists(st.integers(1, 20), min_size=1, max_size=6),
    before_wrap=st.integers(0, 30),
    pieces=st.lists(st.integers(1, 40), min_size=1, max_size=8),
)
def test_a_window_holds_at_most_its_frames_and_counts_each_answer_once_across_the_wrap(
    window: int, batches: list[int], before_wrap: int, pieces: list[int]
) -> None:
    """Batches of any sizes through a window of any size: never more frames in flight
    than the window, each answered message acknowledged once, in order, numbers wrapping
    from 999,999,999 to 1, and nothing read beyond the answers."""
    sizes = itertools.cycle(pieces)

    class Answering(_FakeSocket):
        """Answers each frame once it is sent, handed out in pieces of ``pieces``."""

        frames = 0
        answers_read = 0

        def send(self, data: bytes | memoryview) -> int:
            sent = super().send(data)
            for frame in bytes(data).splitlines():
                self._answers += b"%s rsp 6 200 OK\n" % frame.split()[0]
                self.frames += 1
            assert self.frames - self.answers_read <= window
            return sent

        def recv(self, size: int, flags: int = 0) -> bytes:
            assert self._answers or flags & socket.MSG_DONTWAIT, "a wait for no answer"
            chunk = super().recv(min(size, next(sizes)), flags)
            self.answers_read += chunk.count(b"\n")
            return chunk

    fake = Answering(b"")
    session = RelpSession(fake, lambda: False, window=window)  # type: ignore[arg-type]
    start = _MAX_TXNR - before_wrap
    session._txnr = start
    acknowledged: list[int] = []
    for index, size in enumerate(batches):
        session.send([b"b%d m%d" % (index, m) for m in range(size)], acknowledged.append)
        assert session.outstanding <= window
    session.drain(acknowledged.append)
    total = sum(batches)
    assert sum(acknowledged) == total
    assert all(run > 0 for run in acknowledged)
    numbers = [(start + offset) % _MAX_TXNR + 1 for offset in range(total)]
    assert [int(frame.split()[0]) for frame in fake.sent.splitlines()] == numbers
    assert fake._answers == b""


@given(first=st.one_of(st.integers(1, _MAX_TXNR), st.sampled_from([9, 99, 999_999_990])),
       count=st.integers(0, 3000))  # fmt: skip
def test_the_length_of_the_plain_answers_awaited_is_theirs(first: int, count: int) -> None:
    """What the C core awaits for ``count`` answers is as long as those answers, across
    the lengths of the numbers and their wrap."""
    answers = b"".join(
        b"%d rsp 6 200 OK\n" % ((number - 1) % _MAX_TXNR + 1)
        for number in range(first, first + count)
    )
    assert _plain_length(first, count) == len(answers)


def test_the_open_answer_must_be_the_open_one() -> None:
    """An answer numbered for another command does not open the session."""
    session = RelpSession(_FakeSocket(b"7 rsp 6 200 OK\n"), lambda: False)  # type: ignore[arg-type]
    with pytest.raises(RelpError, match="answer 7 to open 1"):
        session.open()


def test_a_session_waiting_on_the_server_stops_when_told() -> None:
    """Blocked sending or waiting for an answer, a session ends once close() gives up."""

    class Stuck(_FakeSocket):
        def send(self, data: bytes | memoryview) -> int:
            raise TimeoutError

    with pytest.raises(Stopped):
        _exchange(RelpSession(Stuck(b""), lambda: True), [b"one"], lambda count: None)  # type: ignore[arg-type]

    class Silent(_FakeSocket):
        def recv(self, size: int, flags: int = 0) -> bytes:
            if flags & socket.MSG_DONTWAIT:
                raise BlockingIOError
            raise TimeoutError

    with pytest.raises(Stopped):
        _exchange(RelpSession(Silent(b""), lambda: True), [b"one"], lambda count: None)  # type: ignore[arg-type]
    with pytest.raises(TimeoutError):
        RelpSession(Silent(b""), lambda: True).open()  # type: ignore[arg-type]


def test_saying_goodbye_to_a_server_that_drips_its_answer_ends() -> None:
    """The answer to ``close`` is read for one socket timeout in all, not one per byte:
    a server dripping a long answer a byte at a time does not hold close() up."""
    ours, theirs = socket.socketpair()
    stop = threading.Event()
    dripped = 0

    def drip() -> None:
        nonlocal dripped
        theirs.sendall(b"1 rsp 6 200 OK\n3 rsp 60000 200 OK")
        # 60,000 bytes at one per 0.05 s: fifty minutes of answer, each byte well
        # within the socket timeout.
        while not stop.wait(0.05) and dripped < 60000:
            theirs.sendall(b".")
            dripped += 1

    dripper = threading.Thread(target=drip, daemon=True)
    try:
        ours.settimeout(0.5)
        session = RelpSession(ours, lambda: False)
        dripper.start()
        session.open()
        session.close()
        assert dripped < 60000
    finally:
        stop.set()
        dripper.join(10)
        ours.close()
        theirs.close()


def test_answers_that_come_steadily_are_counted_as_they_come() -> None:
    """A server that answers slowly but steadily never leaves the socket idle for its
    timeout: its answers are counted as they come, not once the last is in (close()
    giving up meanwhile would have counted every one of them lost)."""
    ours, theirs = socket.socketpair()
    count = 40
    answers = b"".join(b"%d rsp 6 200 OK\n" % number for number in range(2, count + 2))
    acknowledged: list[int] = []
    dripped_all = threading.Event()
    stop = threading.Event()

    def server() -> None:
        theirs.sendall(b"1 rsp 6 200 OK\n")
        received = b""
        while received.count(b" syslog ") < count:
            received += theirs.recv(65536)
        # One byte every 10 ms: six seconds of answers, never idle for the timeout.
        for at in range(len(answers)):
            if stop.wait(0.01):
                return
            theirs.sendall(answers[at : at + 1])
        dripped_all.set()

    def client() -> None:
        session = RelpSession(ours, lambda: False)
        session.open()
        session.send([b"message %d" % i for i in range(count)], acknowledged.append)
        session.drain(acknowledged.append)

    threads = [threading.Thread(target=target, daemon=True) for target in (server, client)]
    ours.settimeout(0.5)
    try:
        for thread in threads:
            thread.start()
        wait_until(lambda: sum(acknowledged) > 0 or dripped_all.is_set(), timeout=30)
        assert not dripped_all.is_set()
        dripped_all.wait(30)
        threads[1].join(30)
        assert sum(acknowledged) == count
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
        ours.close()
        theirs.close()
