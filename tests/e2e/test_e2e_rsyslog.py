"""End to end: the syslog sinks against a real rsyslogd started by the tests.

rsyslogd (Debian's rsyslog and rsyslog-gnutls, which `make test-tools` installs) runs
on loopback ports with a generated configuration (tests/_collectors.py) whose template
writes ``%app-name% %procid% %hostname% %pri% %msg%`` per line: every field of the RFC
5424 header must be parsed back, and every message be the line the format made.
"""

from __future__ import annotations

import json
import os
import re
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from gunicorn.config import Config

from _collectors import (
    RSYSLOGD,
    Rsyslogd,
    free_port,
    submit_paths,
    through_a_restart,
    wait_for_retries,
    write_certificates,
)
from _records import make_record
from _servers import (
    FLUSH_INTERVAL_VARIABLE,
    FORMAT_VARIABLE,
    LOOPBACK,
    PYTHON,
    REPO_ROOT,
    SERVER_TZ,
    SINK_VARIABLE,
    UVICORN_CLEAN_EXITS,
    build_exchanges,
    check_log,
    running_server,
    send_exchanges,
    stop_gracefully,
    uvicorn_app_command,
)
from boundlog import AccessLog, NetworkSink, Stats
from boundlog.gunicorn import Logger

FAST = {"retry_initial": 0.01, "retry_max": 0.2}
HOSTNAME = socket.gethostname()


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path, Path]]:
    directory = tmp_path_factory.mktemp("certificates")
    return {name: write_certificates(directory, name) for name in ("good", "other")}


@pytest.fixture
def rsyslogd(
    tmp_path: Path, certificates: dict[str, tuple[Path, Path, Path]]
) -> Iterator[Rsyslogd]:
    daemon = Rsyslogd(tmp_path / "rsyslog", tls=certificates["good"]).start()
    try:
        yield daemon
    finally:
        daemon.stop()


def _url(daemon: Rsyslogd, transport: str) -> str:
    return {
        "tcp": f"syslog://127.0.0.1:{daemon.tcp_port}",
        # The certificate names localhost only (test_tls_checks_the_host_name).
        "tls": f"syslog+tls://localhost:{daemon.tls_port}",
        "udp": f"syslog+udp://127.0.0.1:{daemon.udp_port}",
        "unix": f"syslog+unix://{daemon.unix_path}",
        "relp": f"relp://127.0.0.1:{daemon.relp_port}",
    }[transport]


def _context(certificates: dict[str, tuple[Path, Path, Path]], ca: str) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(certificates[ca][0]))


def _fields(line: str) -> tuple[str, str, str, str, str]:
    app, procid, hostname, pri, msg = line.split(" ", 4)
    return app, procid, hostname, pri, msg


def _identity_holds(stats: Stats) -> None:
    assert stats.submitted == stats.written + stats.dropped + stats.filtered + stats.failed
    assert stats.queued == 0


@pytest.mark.parametrize("transport", ["tcp", "tls", "udp", "unix", "relp"])
@pytest.mark.parametrize("log_format", ["combined", "json"])
def test_every_line_arrives_and_every_field_parses(
    rsyslogd: Rsyslogd,
    certificates: dict[str, tuple[Path, Path, Path]],
    transport: str,
    log_format: str,
) -> None:
    """Each record is one message: app-name, procid, host name, PRI and the line as MSG."""
    options = {"ssl_context": _context(certificates, "good")} if transport == "tls" else {}
    sink = NetworkSink(_url(rsyslogd, transport), app_name="shop-web", **options)
    count = 500
    # In bursts rsyslogd reads before the next: datagrams beyond its socket's buffer
    # would be lost by the kernel, as UDP may (docs/shipping.md).
    burst = 50 if transport in ("udp", "unix") else count
    with AccessLog(sink, log_format, flush_interval=3600) as log:
        for i in range(count):
            log.submit(make_record(path=b"/item/%d" % i, user_agent="agent é/%d".encode() % i))
            if (i + 1) % burst == 0:
                assert log.flush(timeout=30)
                rsyslogd.wait_for_lines(i + 1)
    stats = log.stats()
    assert stats.written == count
    assert stats.failed == 0
    lines = rsyslogd.wait_for_lines(count)
    assert len(lines) == count
    seen = []
    for line in lines:
        app, procid, hostname, pri, msg = _fields(line)
        assert (app, procid, hostname, pri) == ("shop-web", str(os.getpid()), HOSTNAME, "190")
        if log_format == "json":
            record = json.loads(msg)
            seen.append((record["path"], record["user_agent"]))
        else:
            assert msg.startswith("127.0.0.1 - - ["), msg
            seen.append((msg.split('"GET ')[1].split(" ")[0], msg.split('"')[-2]))
    # The combined format escapes bytes past ASCII; JSON keeps them.
    agent = "agent é/{}" if log_format == "json" else "agent \\xc3\\xa9/{}"
    expected = [(f"/item/{i}", agent.format(i)) for i in range(count)]
    # UDP and unix datagrams may be reordered by rsyslogd's threads; the others not.
    assert sorted(seen) == sorted(expected)
    if transport in ("tcp", "tls", "relp"):
        assert seen == expected


@pytest.mark.parametrize("transport", ["tcp", "tls"])
def test_a_line_past_rsyslogd_s_limit_is_one_message_not_two(
    rsyslogd: Rsyslogd, certificates: dict[str, tuple[Path, Path, Path]], transport: str
) -> None:
    """rsyslogd reads what is past its maxMessageSize as a message of its own: a
    client's long request would write one of its choosing.  The sink cuts first."""
    options = {"ssl_context": _context(certificates, "good")} if transport == "tls" else {}
    # Past the 64k the test daemon takes, as a json line with large header fields is.
    forged = b"<13>1 2026-01-01T00:00:00Z host FORGED 666 - - forged by a client"
    with AccessLog(NetworkSink(_url(rsyslogd, transport), **options)) as log:
        log.submit(make_record(path=b"/" + b"a" * 70000 + forged))
        log.submit(make_record(path=b"/after"))
    assert log.stats().written == 2
    lines = rsyslogd.wait_for_lines(2)
    assert "/after " in lines[-1]
    assert len(lines) == 2
    assert not any("FORGED" in line for line in lines)


def test_a_relp_session_ends_as_librelp_ends_it(rsyslogd: Rsyslogd) -> None:
    """close() waits for the answer to its close command, so that rsyslogd can send it:
    otherwise it reports a broken pipe on its stderr at every restart of a server."""
    # What rsyslogd said before: the fixture's probes of its ports, which end abruptly.
    before = len((rsyslogd.directory / "rsyslogd.stderr").read_text())
    for number in range(2):
        with AccessLog(NetworkSink(_url(rsyslogd, "relp")), flush_interval=3600) as log:
            log.submit(make_record(path=b"/session/%d" % number))
        # The second session's line arriving means rsyslogd is done with the first.
        rsyslogd.wait_for_lines(number + 1)
    reported = (rsyslogd.directory / "rsyslogd.stderr").read_text()[before:]
    # rsyslogd's answer to a close that nobody read: "error sending relp: Broken pipe".
    assert "Broken pipe" not in reported, reported


def test_rsyslogd_stopped_and_restarted_mid_stream(rsyslogd: Rsyslogd) -> None:
    """The counters add up across a restart, and what is sent after it all arrives."""
    log = AccessLog(NetworkSink(_url(rsyslogd, "tcp"), **FAST), policy="wait", batch_size=20)
    stats = through_a_restart(log, rsyslogd, 200)
    assert stats.submitted == 600
    assert stats.failed == 0
    assert stats.written == 600
    deadline = time.monotonic() + 30
    while not any("/after/199 " in line for line in rsyslogd.lines()):
        assert time.monotonic() < deadline, "the last record did not arrive"
        time.sleep(0.02)
    lines = rsyslogd.lines()
    after = [line.split('"GET ')[1].split(" ")[0] for line in lines if "/after/" in line]
    assert after == [f"/after/{i}" for i in range(200)]
    # At most the lines in flight when rsyslogd stopped are lost, never more than sent.
    assert 400 <= len(lines) <= 600


def test_relp_through_a_restart_loses_nothing_acknowledged(rsyslogd: Rsyslogd) -> None:
    """Under wait, every record counted as written over RELP is in rsyslogd's file, and
    every record is written: the unacknowledged ones are sent again after the restart."""
    log = AccessLog(NetworkSink(_url(rsyslogd, "relp"), **FAST), policy="wait", batch_size=20)
    stats = through_a_restart(log, rsyslogd, 200)
    assert stats.written == 600
    assert stats.failed == 0
    expected = {f"/{stage}/{i}" for stage in ("before", "during", "after") for i in range(200)}
    deadline = time.monotonic() + 30
    while True:
        found = {line.split('"GET ')[1].split(" ")[0] for line in rsyslogd.lines()}
        if found >= expected:
            break
        assert time.monotonic() < deadline, f"missing {sorted(expected - found)[:5]}"
        time.sleep(0.02)
    # At least once: a window may be duplicated, nothing else.
    assert found == expected
    assert len(rsyslogd.lines()) >= 600


def test_rsyslogd_down_at_start_and_up_later(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Records wait while rsyslogd is not there yet, and all arrive once it is."""
    daemon = Rsyslogd(tmp_path / "late")
    log = AccessLog(NetworkSink(_url(daemon, "tcp"), **FAST), policy="wait")
    submit_paths(log, "early", 300)
    wait_for_retries(log, 2)
    daemon.start()
    try:
        stats = log.close(timeout=60)
        assert stats.written == 300
        assert stats.failed == 0
        lines = daemon.wait_for_lines(300)
    finally:
        daemon.stop()
    assert [line.split('"GET ')[1].split(" ")[0] for line in lines] == [
        f"/early/{i}" for i in range(300)
    ]
    err = capfd.readouterr().err
    assert f"cannot connect to syslog://127.0.0.1:{daemon.tcp_port}: Connection refused" in err
    assert "again, after" in err


def test_tls_with_the_wrong_ca_is_refused_and_nothing_arrives(
    rsyslogd: Rsyslogd,
    certificates: dict[str, tuple[Path, Path, Path]],
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A server certificate from another CA: reported with its reason, retried, never
    sent in plaintext; close counts the records failed."""
    sink = NetworkSink(_url(rsyslogd, "tls"), ssl_context=_context(certificates, "other"), **FAST)
    log = AccessLog(sink, policy="wait")
    submit_paths(log, "secret", 10)
    wait_for_retries(log, 2)
    stats = log.close(timeout=0.5)
    _identity_holds(stats)
    assert stats.written == 0
    assert stats.failed == 10
    err = capfd.readouterr().err
    assert f"TLS handshake failed with syslog+tls://localhost:{rsyslogd.tls_port}" in err
    assert "certificate verify failed" in err
    # The same daemon still takes a verified connection: nothing from the refused one.
    good = NetworkSink(_url(rsyslogd, "tls"), ssl_context=_context(certificates, "good"))
    with AccessLog(good) as log:
        log.submit(make_record(path=b"/verified"))
    lines = rsyslogd.wait_for_lines(1)
    assert len(lines) == 1
    assert "/verified" in lines[0]


def test_tls_checks_the_host_name(
    rsyslogd: Rsyslogd,
    certificates: dict[str, tuple[Path, Path, Path]],
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The right CA but a name the certificate does not carry: refused too."""
    context = _context(certificates, "good")
    # The certificate names localhost, not the address it resolves to.
    sink = NetworkSink(f"syslog+tls://127.0.0.1:{rsyslogd.tls_port}", ssl_context=context, **FAST)
    log = AccessLog(sink)
    log.submit(make_record())
    wait_for_retries(log, 1)
    stats = log.close(timeout=0.5)
    assert stats.failed == 1
    assert "certificate verify failed" in capfd.readouterr().err
    assert rsyslogd.lines() == []


def test_gunicorn_workers_ship_to_one_rsyslogd(rsyslogd: Rsyslogd, tmp_path: Path) -> None:
    """``--access-logfile syslog://...`` with 4 workers: each sends its own lines, with
    its own pid as PROCID, over its own connection; all arrive when they stop."""
    url = _url(rsyslogd, "tcp")

    def command(port: int) -> list[str]:
        return [
            PYTHON, "-m", "gunicorn", "--logger-class", "boundlog.gunicorn.Logger",
            "-b", f"{LOOPBACK}:{port}", "-w", "4", "--graceful-timeout", "10",
            "--log-level", "warning", "--access-logfile", url,
            "--access-logformat", "combined", "tests.apps.bare_wsgi:app",
        ]  # fmt: skip

    exchanges = build_exchanges(200)
    with running_server(command, {"TZ": SERVER_TZ}, tmp_path / "gunicorn.out") as server:
        started = time.time()
        send_exchanges(server.port, exchanges)
        finished = time.time()
        master = server.process.pid
        stop_gracefully(server)
    lines = rsyslogd.wait_for_lines(len(exchanges))
    messages = [_fields(line)[4].encode() for line in lines]
    check_log(messages, exchanges, "combined", started, finished, app_policy=False)
    procids = {_fields(line)[1] for line in lines}
    assert str(master) not in procids
    assert {_fields(line)[0] for line in lines} == {"gunicorn"}


def test_uvicorn_under_load_while_rsyslogd_is_down(tmp_path: Path) -> None:
    """Every request is answered while the collector is down; the records wait in the
    queue, and all arrive once rsyslogd is up and the server stops."""
    daemon = Rsyslogd(tmp_path / "rsyslog")
    url = _url(daemon, "tcp")

    environment = {
        SINK_VARIABLE: url,
        FORMAT_VARIABLE: "combined",
        FLUSH_INTERVAL_VARIABLE: "0.01",
        "TZ": SERVER_TZ,
    }
    exchanges = build_exchanges(1500)
    with running_server(uvicorn_app_command, environment, tmp_path / "uvicorn.out") as server:
        started = time.time()
        # Every response is checked as it comes: none waits for the collector.
        send_exchanges(server.port, exchanges)
        finished = time.time()
        daemon.start()
        try:
            assert server.stop() in UVICORN_CLEAN_EXITS
            output = server.output()
            logged = [exchange for exchange in exchanges if exchange.logged]
            lines = daemon.wait_for_lines(len(logged))
        finally:
            daemon.stop()
    check_log(
        [_fields(line)[4].encode() for line in lines], exchanges, "combined", started, finished
    )
    assert f"boundlog: cannot connect to {url}: Connection refused" in output
    assert f"boundlog: sending to {url} again" in output
    reports = [line for line in output.splitlines() if line.startswith("boundlog:")]
    # One report per 5 s at most while it was down, and the recovery.
    assert len(reports) <= 2 + (finished - started) / 5, reports


def test_a_url_no_collector_listens_on_delays_no_one(tmp_path: Path) -> None:
    """syslog:// to a closed port under drop: nothing blocks, close gives up, all counted."""
    log = AccessLog(
        NetworkSink(f"syslog://127.0.0.1:{free_port()}", **FAST), max_queue=100, close_timeout=0.5
    )
    for _ in range(1000):
        log.submit(make_record())
    stats = log.close()
    _identity_holds(stats)
    assert stats.written == 0
    assert stats.dropped + stats.failed == 1000
    assert stats.dropped >= 800


def test_gunicorn_logger_takes_a_url_and_refuses_a_bad_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--access-logfile with a URL opens no file; an unknown scheme stops gunicorn with
    the valid ones named."""
    monkeypatch.chdir(tmp_path)
    cfg = Config()
    cfg.set("accesslog", f"relp://127.0.0.1:{free_port()}")
    logger = Logger(cfg)
    assert logger.boundlog is not None
    assert repr(logger.boundlog).startswith("<AccessLog relp://127.0.0.1:")
    assert not [h for h in logger.access_log.handlers if getattr(h, "_gunicorn", False)]
    logger.boundlog.close(timeout=0)
    cfg.set("accesslog", "sylsog://collector:514")
    with pytest.raises(RuntimeError, match="boundlog: unknown network sink scheme 'sylsog'"):
        Logger(cfg)
    assert list(tmp_path.iterdir()) == []


def rsyslogd_check(path: Path, configuration: str) -> subprocess.CompletedProcess[str]:
    """``rsyslogd -N1 -f path`` on ``configuration``: rsyslogd's own check of a config."""
    assert RSYSLOGD is not None
    path.write_text(configuration)
    return subprocess.run(
        [RSYSLOGD, "-N1", "-f", str(path)], capture_output=True, text=True, timeout=60
    )


# The three files docs/collectors.md's TLS part names, and what write_certificates makes.
TLS_FILES = ("/etc/rsyslog.d/ca.pem", "/etc/rsyslog.d/cert.pem", "/etc/rsyslog.d/key.pem")


def test_the_documented_rsyslog_configurations_pass_rsyslogd_s_check(tmp_path: Path) -> None:
    """docs/collectors.md's configurations, read from the page, as ``rsyslogd -N1``
    validates them (modules and parameters; nothing is bound, no broker is reached):
    the plain one as written; with its TLS part, once the three files that part names
    exist (made here, a throwaway CA and a certificate it signed, in place of the
    paths under /etc); and with the forwarding to Kafka and Elasticsearch in place of
    the file."""
    text = (REPO_ROOT / "docs" / "collectors.md").read_text()
    blocks = re.findall(r"^```\w*\n(.*?)^```$", text, re.M | re.S)
    base, tls, forwarding = [
        block
        for block in blocks
        if "module(load=" in block or "defaultNetstreamDriverCAFile" in block
    ][:3]
    assert "defaultNetstreamDriver" not in base
    # Loopback only, as the page says.
    inputs = re.findall(r"input\((.*?)\)", base + tls, re.S)
    assert len(inputs) == 4
    assert all('address="127.0.0.1"' in item for item in inputs), inputs
    checked = rsyslogd_check(tmp_path / "plain.conf", base)
    assert checked.returncode == 0, f"{checked.stdout}{checked.stderr}"

    # The TLS part goes after the module lines, as the page says.
    last_module = base.rindex("module(load=")
    after_modules = base.index("\n", last_module) + 1
    with_tls = base[:after_modules] + tls + base[after_modules:]
    # Without its files, rsyslogd refuses it: the page says they must exist first.
    missing = with_tls
    for name in TLS_FILES:
        assert with_tls.count(name) == 1, name
        missing = missing.replace(name, str(tmp_path / "missing" / Path(name).name))
    assert rsyslogd_check(tmp_path / "missing.conf", missing).returncode != 0
    for name, made in zip(TLS_FILES, write_certificates(tmp_path / "tls", "docs"), strict=True):
        with_tls = with_tls.replace(name, str(made))
    checked = rsyslogd_check(tmp_path / "tls.conf", with_tls)
    assert checked.returncode == 0, f"{checked.stdout}{checked.stderr}"

    # The forwarding takes the place of the file's `if` block, which ends the plain one.
    to_file = base[base.index("if $syslogfacility-text") :]
    assert 'action(type="omfile"' in to_file
    checked = rsyslogd_check(tmp_path / "forwarding.conf", base.replace(to_file, forwarding))
    assert checked.returncode == 0, f"{checked.stdout}{checked.stderr}"
