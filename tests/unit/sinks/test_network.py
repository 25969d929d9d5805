"""Network sinks against a Python collector: tcp:// lines as Vector's socket source
reads them, what happens while the collector is away, and the RFC 5424 framings."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from _collectors import (
    LineServer,
    free_port,
    submit_paths,
    through_a_restart,
    wait_for_retries,
    write_certificates,
)
from _records import make_record
from _servers import loss_reports
from boundlog import AccessLog, ConfigurationError, NetworkSink, Stats
from boundlog.sinks._network import cause_of
from boundlog.sinks._syslog import Syslog, datagrams, octet_counted

# Quick retries: the tests wait for the sink to come back, never for a fixed time.
FAST = {"retry_initial": 0.01, "retry_max": 0.1}


def _identity_holds(stats: Stats) -> None:
    assert stats.submitted == stats.written + stats.dropped + stats.filtered + stats.failed
    assert stats.queued == 0


def _paths(lines: list[bytes]) -> list[bytes]:
    return [re.search(rb'"GET (\S+) ', line).group(1) for line in lines]  # type: ignore[union-attr]


def test_tcp_lines_arrive_whole_and_in_order() -> None:
    """Every record is one newline-terminated line, in order, over one connection."""
    server = LineServer().start()
    try:
        with AccessLog(f"tcp://127.0.0.1:{server.port}", batch_size=64) as log:
            for i in range(1000):
                log.submit(make_record(path=b"/r/%d" % i))
        stats = log.stats()
        assert stats.written == 1000
        assert stats.failed == 0
        server.wait_for_lines(1000)
        assert stats.bytes_written == sum(len(line) + 1 for line in server.received())
        assert _paths(server.received()) == [b"/r/%d" % i for i in range(1000)]
        assert server.connections == 1
    finally:
        server.stop()


def test_tls_lines_arrive_and_a_wrong_certificate_is_refused(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """tls:// verifies the collector's certificate (CA and host name) before any line."""
    ca, cert, key = write_certificates(tmp_path, "lines")
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)
    server = LineServer(tls=server_context).start()
    try:
        client = ssl.create_default_context(cafile=str(ca))
        with AccessLog(NetworkSink(f"tls://localhost:{server.port}", ssl_context=client)) as log:
            submit_paths(log, "tls", 50)
        assert log.stats().written == 50
        assert _paths(server.wait_for_lines(50)) == [b"/tls/%d" % i for i in range(50)]
        # The system's store knows no test CA: refused, reported, counted, nothing sent.
        refused = AccessLog(NetworkSink(f"tls://localhost:{server.port}", **FAST))
        submit_paths(refused, "plain", 5)
        wait_for_retries(refused, 2)
        stats = refused.close(timeout=0.2)
        assert stats.failed == 5
        assert len(server.received()) == 50
    finally:
        server.stop()
    err = capfd.readouterr().err
    assert (
        f"TLS handshake failed with tls://localhost:{server.port}: certificate verify failed" in err
    )
    # The closing line names the cause too: the reports before it may have been held back.
    assert (
        f"the last failure: close() gave up waiting for tls://localhost:{server.port} "
        f"(TLS handshake failed with tls://localhost:{server.port}: certificate verify failed"
    ) in err


def test_each_batch_is_one_send(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch of lines goes out in one send call when the kernel takes it all."""
    server = LineServer().start()
    sends: list[int] = []
    real_send = socket.socket.send

    def spy(self: socket.socket, data: bytes, *args: int) -> int:
        sends.append(len(data))
        return real_send(self, data, *args)

    monkeypatch.setattr(socket.socket, "send", spy)
    try:
        log = AccessLog(f"tcp://127.0.0.1:{server.port}", flush_interval=3600)
        for i in range(100):
            log.submit(make_record(path=b"/b/%d" % i))
        assert log.flush(timeout=30)
        stats = log.close()
        assert stats.batches == 1
        assert len(sends) == 1
        assert sends[0] == stats.bytes_written
    finally:
        server.stop()


def _wait_for(server: LineServer, path: bytes, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while path not in _paths(server.received()):
        assert time.monotonic() < deadline, f"{path!r} did not arrive"
        time.sleep(0.01)


def test_collector_down_at_start_and_up_later(capfd: pytest.CaptureFixture[str]) -> None:
    """Records wait in the queue while nobody listens and all go out once it listens."""
    port = free_port()
    log = AccessLog(NetworkSink(f"tcp://127.0.0.1:{port}", **FAST), policy="wait")
    for i in range(200):
        log.submit(make_record(path=b"/late/%d" % i))
    wait_for_retries(log, 3)
    server = LineServer(port).start()
    try:
        stats = log.close(timeout=30)
        assert stats.written == 200
        assert stats.failed == 0
        assert stats.dropped == 0
        _identity_holds(stats)
        server.wait_for_lines(200)
        assert _paths(server.received()) == [b"/late/%d" % i for i in range(200)]
    finally:
        server.stop()
    err = capfd.readouterr().err
    assert (
        f"boundlog: cannot connect to tcp://127.0.0.1:{port}: Connection refused; retrying in"
        in err
    )
    assert "records waiting" in err
    assert f"boundlog: sending to tcp://127.0.0.1:{port} again, after" in err


def test_close_retries_at_once_rather_than_after_the_wait() -> None:
    """A collector back during an hour's wait between attempts: close() tries at once."""
    port = free_port()
    sink = NetworkSink(f"tcp://127.0.0.1:{port}", retry_initial=3600, retry_max=3600)
    log = AccessLog(sink)
    submit_paths(log, "hurried", 20)
    wait_for_retries(log, 1)
    server = LineServer(port).start()
    try:
        stats = log.close(timeout=30)
        assert stats.written == 20
        assert len(server.wait_for_lines(20)) == 20
    finally:
        server.stop()


def test_collector_never_up(capfd: pytest.CaptureFixture[str]) -> None:
    """close(timeout) returns, everything is counted (lost as failed), stderr stays quiet."""
    port = free_port()
    log = AccessLog(NetworkSink(f"syslog://127.0.0.1:{port}", **FAST), max_queue=100)
    for i in range(150):
        log.submit(make_record(path=b"/never/%d" % i))
    started = time.monotonic()
    stats = log.close(timeout=1.0)
    # Generous: what is checked is that close gives up, not how fast.
    assert time.monotonic() - started < 10
    _identity_holds(stats)
    assert stats.written == 0
    assert stats.failed + stats.dropped == 150
    assert stats.failed > 0
    assert stats.write_errors > 0
    reports = loss_reports(capfd.readouterr().err)
    # The connection's report (and perhaps one more, 5 s later), and the final totals.
    assert 1 <= len(reports.others) <= 2, reports
    assert len(reports.periodic) <= 1, reports
    assert reports.final == [(stats.dropped, stats.failed, reports.final[0][2])], reports


@pytest.mark.parametrize("tls", [False, True])
def test_the_collector_restarting_mid_stream_keeps_the_counts_exact(
    tmp_path: Path, tls: bool
) -> None:
    """Counters add up across a collector that goes away and comes back; what arrives
    after it is back is every line sent to it (a TLS connection is remade too)."""
    if tls:
        ca, cert, key = write_certificates(tmp_path, "restart")
        server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        server_context.load_cert_chain(cert, key)
        server = LineServer(tls=server_context).start()
        client = ssl.create_default_context(cafile=str(ca))
        sink = NetworkSink(f"tls://localhost:{server.port}", ssl_context=client, **FAST)
    else:
        server = LineServer().start()
        sink = NetworkSink(f"tcp://127.0.0.1:{server.port}", **FAST)
    log = AccessLog(sink, policy="wait")
    try:
        stats = through_a_restart(log, server, 300)
        _wait_for(server, b"/after/299")
    finally:
        server.stop()
    assert stats.submitted == 900
    assert stats.dropped == 0
    # TCP: lines the kernel took before it learned the peer was gone are counted written
    # and may be lost (docs/shipping.md); nothing is counted failed under wait.
    assert stats.failed == 0
    assert stats.written == 900
    received = _paths(server.received())
    assert received[:300] == [b"/before/%d" % i for i in range(300)]
    assert [p for p in received if p.startswith(b"/after/")] == [
        b"/after/%d" % i for i in range(300)
    ]
    assert server.connections >= 2


def test_drop_counts_what_does_not_fit_while_the_collector_is_away() -> None:
    """Under drop the queue stays bounded: records past max_queue are dropped, counted."""
    port = free_port()
    log = AccessLog(NetworkSink(f"tcp://127.0.0.1:{port}", **FAST), max_queue=50, batch_size=10)
    log.submit(make_record(path=b"/first"))
    wait_for_retries(log, 1)
    for _ in range(500):
        log.submit(make_record())
    assert log.stats().dropped > 0
    assert log.stats().queued <= 50
    server = LineServer(port).start()
    try:
        stats = log.close(timeout=30)
        _identity_holds(stats)
        assert stats.failed == 0
        assert stats.dropped > 0
        server.wait_for_lines(stats.written)
        assert len(server.received()) == stats.written
    finally:
        server.stop()


def test_a_forked_child_has_its_own_connection() -> None:
    """The child's records go over a connection of its own; the parent's is untouched."""
    server = LineServer().start()
    try:
        log = AccessLog(f"tcp://127.0.0.1:{server.port}")
        log.submit(make_record(path=b"/parent/1"))
        assert log.flush(timeout=30)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child reports by exit status
            ok = False
            try:
                log.submit(make_record(path=b"/child"))
                ok = log.close(timeout=30).written == 1
            finally:
                os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        log.submit(make_record(path=b"/parent/2"))
        stats = log.close(timeout=30)
        assert stats.written == 2
        server.wait_for_lines(3)
        assert sorted(_paths(server.received())) == [b"/child", b"/parent/1", b"/parent/2"]
        assert server.connections == 2
    finally:
        server.stop()


def test_octet_counting_frames_each_line() -> None:
    """MSG-LEN is the byte length of the message that follows; the newline is not sent."""
    header = Syslog(facility=23, severity=6, hostname="web1", app_name="app").header()
    assert re.fullmatch(
        rb"<190>1 \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z web1 app %d - - " % os.getpid(), header
    )
    data = "first line\nsecond é line\n".encode()
    framed, frame_ends, data_ends, cut = octet_counted(header, data, 8192)
    assert cut == 0
    messages = []
    at = 0
    while at < len(framed):
        space = framed.index(b" ", at)
        size = int(framed[at:space])
        messages.append(framed[space + 1 : space + 1 + size])
        at = space + 1 + size
        assert at in frame_ends
    assert messages == [header + b"first line", header + "second é line".encode()]
    assert data_ends == [11, len(data)]


def test_datagrams_are_cut_to_the_limit_on_a_character_boundary() -> None:
    """A message past the limit is cut (never inside a UTF-8 character) and counted."""
    header = b"<190>1 - h a 1 - - "
    data = b"short\n" + "é".encode() * 100 + b"\n"
    messages, ends, cut = datagrams(header, data, len(header) + 51)
    assert cut == 1
    assert messages[0] == header + b"short"
    assert messages[1] == header + "é".encode() * 25
    assert ends == [6, len(data)]


@given(
    header=st.binary(max_size=20),
    lines=st.lists(st.binary(max_size=30).map(lambda line: line.replace(b"\n", b"")), max_size=8),
    ending=st.booleans(),
)
def test_uncut_messages_are_what_a_limit_never_reached_gives(
    header: bytes, lines: list[bytes], ending: bool
) -> None:
    """RELP's messages (no limit) are the general path's with a limit no line reaches:
    one per line, its end in the data, none cut; a last line may lack its newline."""
    data = b"\n".join(lines) + (b"\n" if ending and lines else b"")
    never = len(header) + len(data) + 1
    assert datagrams(header, data, None) == datagrams(header, data, never)


def test_udp_sink_counts_truncated_messages(capfd: pytest.CaptureFixture[str]) -> None:
    """syslog+udp cuts a long line to max_datagram, says so, and still counts it written."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as reader:
        reader.bind(("127.0.0.1", 0))
        port = reader.getsockname()[1]
        sink = NetworkSink(f"syslog+udp://127.0.0.1:{port}", max_datagram=600)
        with AccessLog(sink) as log:
            log.submit(make_record(path=b"/" + b"x" * 2000))
            log.submit(make_record(path=b"/short"))
        assert log.stats().written == 2
        assert sink.truncated == 1
        assert len(reader.recv(65536)) == 600
        assert b"/short" in reader.recv(65536)
    assert (
        f"cut 1 message(s) to 600 bytes for syslog+udp://127.0.0.1:{port}" in capfd.readouterr().err
    )


def test_octet_counted_messages_are_cut_to_the_limit_on_a_character_boundary() -> None:
    """A frame never carries more than the limit: a collector would read the rest as
    a message of its own (one the client wrote)."""
    header = b"<190>1 - h a 1 - - "
    data = b"short\n" + "é".encode() * 100 + b"<13>1 - forged\n"
    framed, frame_ends, data_ends, cut = octet_counted(header, data, len(header) + 51)
    assert cut == 1
    assert framed == b"%d %sshort%d %s%s" % (
        len(header) + 5, header, len(header) + 50, header, "é".encode() * 25
    )  # fmt: skip
    assert data_ends == [6, len(data)]
    assert frame_ends == [len(framed) - len(header) - 53, len(framed)]


def test_syslog_over_tcp_cuts_a_long_line_to_max_message(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """syslog:// sends at most max_message bytes a message (8192 unless told), says so,
    and still counts the record written."""
    server = LineServer().start()
    try:
        url = f"syslog://127.0.0.1:{server.port}"
        for sink, limit in ((url, 8192), (NetworkSink(url, max_message=1000), 1000)):
            with AccessLog(sink) as log:
                log.submit(make_record(path=b"/" + b"x" * 20000))
                log.submit(make_record(path=b"/short"))
            assert log.stats().written == 2
            assert f"cut 1 message(s) to {limit} bytes for {url} (max_message)" in (
                capfd.readouterr().err
            )
    finally:
        server.stop()


@contextlib.contextmanager
def _hanging_up(
    serve: Callable[[socket.socket], None],
) -> Iterator[tuple[AccessLog, threading.Event, int]]:
    """A log to a syslog collector on loopback: ``serve`` has its first connection,
    which is then closed (the event set), and every later one is closed at once.
    Yields the log, the event and the port; closes the log after the block, its
    counters adding up."""
    hung_up = threading.Event()
    with socket.create_server(("127.0.0.1", 0)) as listener:

        def run() -> None:
            conn, _ = listener.accept()
            with conn:
                serve(conn)
            hung_up.set()
            listener.accept()[0].close()

        threading.Thread(target=run, daemon=True).start()
        port = listener.getsockname()[1]
        log = AccessLog(NetworkSink(f"syslog://127.0.0.1:{port}", **FAST), flush_interval=3600)
        yield log, hung_up, port
        _identity_holds(log.close(timeout=1))


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (b"", "the collector closed the connection; the 5 record(s) of the last batch sent"),
        # What a TLS server answers to bytes that are no TLS handshake.
        (b"\x15\x03\x01\x00\x02\x02\x16", "(a TLS alert: the port speaks TLS)"),
    ],
    ids=["hangs-up", "tls-alert"],
)
def test_a_collector_that_hangs_up_after_a_batch_is_reported_with_what_it_may_not_have_read(
    answer: bytes, says: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """Records sent on a connection the collector ends are counted written (the kernel
    took them) but said to be at risk, with the question a port that hangs up on every
    client raises: another protocol's?"""

    def answer_the_first_batch(conn: socket.socket) -> None:
        conn.recv(65536)
        conn.sendall(answer)

    with _hanging_up(answer_the_first_batch) as (log, hung_up, port):
        submit_paths(log, "first", 5)
        assert log.flush(timeout=30)
        assert hung_up.wait(30)
        submit_paths(log, "second", 5)
    err = capfd.readouterr().err
    assert says in err
    assert f"is 127.0.0.1:{port} another protocol's port (TLS: syslog+tls://" in err


def test_a_collector_that_closes_a_connection_after_several_batches_is_not_asked_about_its_port(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A connection that carried batches before the collector closed it (an idle
    timeout, a restart) is no sign of another protocol's port: the last batch is said
    to be at risk, without the question."""
    read = threading.Semaphore(0)
    go_away = threading.Event()

    def read_until_told(conn: socket.socket) -> None:
        while not go_away.is_set():
            if conn.recv(65536):
                read.release()

    with _hanging_up(read_until_told) as (log, hung_up, _):
        for batch in range(2):
            submit_paths(log, f"batch-{batch}", 5)
            assert log.flush(timeout=30)
            assert read.acquire(timeout=30)
        go_away.set()
        submit_paths(log, "wakes-the-reader", 1)
        assert log.flush(timeout=30)
        assert hung_up.wait(30)
        submit_paths(log, "after", 5)
    err = capfd.readouterr().err
    assert "the collector closed the connection; the 1 record(s) of the last batch" in err
    assert "another protocol's port" not in err


def test_a_network_sink_is_a_sink_without_a_file() -> None:
    """Nothing to reopen, no file identity, no terminal; the URL names it."""
    sink = NetworkSink("syslog+udp://127.0.0.1:5514")
    assert not sink.isatty()
    assert sink.reopen() is None
    assert sink.identity() is None
    assert not sink.replaced()
    assert sink.path is None
    assert repr(sink) == "<NetworkSink syslog+udp://127.0.0.1:5514>"
    sink.close()


def test_ssl_context_must_be_one() -> None:
    """Anything but an ssl.SSLContext is refused at construction."""
    with pytest.raises(ConfigurationError, match=r"ssl_context must be an ssl\.SSLContext"):
        NetworkSink("tls://127.0.0.1:5170", ssl_context="/etc/ssl/ca.pem")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (ConnectionRefusedError(111, "Connection refused"), "Connection refused"),
        (TimeoutError(), "timed out"),
        (ConnectionError("the server closed the session"), "the server closed the session"),
        (socket.gaierror(-2, "Name or service not known"), "Name or service not known"),
        (OSError(), "OSError"),
    ],
)
def test_reports_say_the_cause_in_words(error: OSError, said: str) -> None:
    """What a report says of each kind of failure."""
    assert cause_of(error) == said


@pytest.mark.parametrize(
    ("scheme", "says"),
    [
        (
            "syslog+tls",
            "no answer to the TLS handshake within 0.2 s: is it a plain port (syslog://)?",
        ),
        ("tls", "no answer to the TLS handshake within 0.2 s: is it a plain port (tcp://)?"),
        ("relp", "no answer to the RELP open within 0.2 s: is it a plain port (syslog://)?"),
    ],
)
def test_a_plain_port_that_answers_no_handshake_is_named_as_such(
    scheme: str, says: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """TLS or RELP aimed at a plain port: connected, then silence; said as such, not as
    a connection that timed out."""
    server = LineServer().start()
    try:
        sink = NetworkSink(f"{scheme}://127.0.0.1:{server.port}", connect_timeout=0.2, **FAST)
        log = AccessLog(sink)
        log.submit(make_record())
        wait_for_retries(log, 1)
        _identity_holds(log.close(timeout=0.5))
    finally:
        server.stop()
    assert says in capfd.readouterr().err
