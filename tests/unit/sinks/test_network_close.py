"""close() giving up on a network sink that holds the writer up: a RELP server that
drips its answers, a TCP or TLS collector that stops reading.  Once close() returns,
nothing of the log is left (no writer thread, no socket), nothing is printed after the
final totals, and the counts add up."""

from __future__ import annotations

import ssl
import time
from pathlib import Path

import pytest

from _collectors import DrippingServer, socket_inodes, submit_paths, write_certificates
from _records import make_record
from _servers import boundlog_warnings, loss_reports
from boundlog import AccessLog, NetworkSink, Stats

# The records are big, so that a few thousand fill a stalled collector's buffers.
_LONG = b"/" + b"x" * 2000


def _identity_holds(stats: Stats) -> None:
    assert stats.submitted == stats.written + stats.dropped + stats.filtered + stats.failed
    assert stats.queued == 0


def _stall(log: AccessLog, timeout: float = 60.0) -> None:
    """Submit until the writer is held up: a flush that does not finish in 0.2 s."""
    deadline = time.monotonic() + timeout
    while True:
        assert time.monotonic() < deadline, f"the collector took everything for {timeout} s"
        for _ in range(500):
            log.submit(make_record(path=_LONG))
        if not log.flush(timeout=0.2):
            return


def _closed_for_good(
    log: AccessLog, server: DrippingServer, before: set[int], capfd: pytest.CaptureFixture[str]
) -> Stats:
    """close(timeout=1) on a held-up log: what must be true once it returns."""
    stats = log.close(timeout=1)
    # Nothing of the log outlives close(): its writer thread ended within close()...
    assert not log._writer.thread.is_alive()
    # ...and with it the socket: the process has no socket but the ones it had before
    # and the collector's.  (The collector sees the end only if it reads: the FIN
    # waits behind the data it left in the buffers.)
    assert socket_inodes() - before - server.socket_inodes == set()
    _identity_holds(stats)
    assert stats.failed > 0
    # The final totals are the last thing said: no "retrying" after them.
    warnings = boundlog_warnings(capfd.readouterr().err)
    assert warnings, "no final totals"
    assert loss_reports(warnings[-1]).final, warnings
    assert not any("retrying" in line for line in warnings), warnings
    return stats


def test_a_relp_server_that_drips_its_answers_is_let_go(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Each answer byte comes within the socket timeout, so only close() shutting the
    socket down ends the wait: the records not acknowledged are failed."""
    server = DrippingServer(relp=True)
    before = socket_inodes()
    try:
        log = AccessLog(
            NetworkSink(f"relp://127.0.0.1:{server.port}", retry_initial=0.01),
            flush_interval=3600,
        )
        submit_paths(log, "drip", 20)
        # The first byte of the first answer: the session is open and the batch sent.
        assert not log.flush(timeout=0.5)
        stats = _closed_for_good(log, server, before, capfd)
        assert server.ended.wait(10)
        assert stats.written == 0
        assert stats.failed == 20
    finally:
        server.close()


@pytest.mark.parametrize("scheme", ["tcp", "syslog+tls"])
def test_a_collector_that_stops_reading_is_let_go(
    scheme: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A send blocked on a full connection ends with close(), over TCP and TLS alike."""
    tls = client = None
    if scheme == "syslog+tls":
        ca, cert, key = write_certificates(tmp_path, "hold")
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(cert, key)
        client = ssl.create_default_context(cafile=str(ca))
    server = DrippingServer(relp=False, tls=tls)
    before = socket_inodes()
    try:
        host = "localhost" if tls else "127.0.0.1"
        log = AccessLog(
            NetworkSink(f"{scheme}://{host}:{server.port}", ssl_context=client),
            max_queue=1000,
        )
        _stall(log)
        _closed_for_good(log, server, before, capfd)
    finally:
        server.close()
