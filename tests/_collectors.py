"""Collectors for the network sink tests: a newline reader like Vector's socket source,
and a real rsyslogd with a generated configuration.

Both listen on loopback ports chosen free at start (port 0, or bound and released), so
the suites can run in parallel, and keep their files under the test's tmp_path.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
import os
import re
import select
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol, TypeVar

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)

from _ports import LOOPBACK, free_port
from _records import make_record
from boundlog import AccessLog, Stats

RSYSLOGD = shutil.which("rsyslogd") or shutil.which("rsyslogd", path="/usr/sbin:/sbin")


class LineServer:
    """Reads newline-terminated lines from every connection, as Vector's socket source.

    ``stop()`` closes the listener and every connection; ``start()`` listens again on the
    same port, so a test can take the collector away and bring it back.
    """

    def __init__(self, port: int | None = None, *, tls: ssl.SSLContext | None = None) -> None:
        self.port = port or free_port()
        self._tls = tls
        self.lines: list[bytes] = []
        self.connections = 0
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._open: list[socket.socket] = []
        self._threads: list[threading.Thread] = []

    def start(self) -> LineServer:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self._listener = listener
        thread = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                self._open.append(conn)
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _serve(self, conn: socket.socket) -> None:
        if self._tls is not None:
            try:
                wrapped = self._tls.wrap_socket(conn, server_side=True)
            except OSError:
                return  # a client that refused our certificate
            with self._lock:
                # stop() must shut the TLS socket down: the plain one is detached.
                self._open = [wrapped if s is conn else s for s in self._open]
            conn = wrapped
        with conn:
            self._read(conn)

    def _read(self, conn: socket.socket) -> None:
        pending = b""
        while True:
            try:
                chunk = conn.recv(1 << 16)
            except OSError:
                return
            if not chunk:
                return
            *whole, pending = (pending + chunk).split(b"\n")
            with self._lock:
                self.lines.extend(whole)

    def received(self) -> list[bytes]:
        with self._lock:
            return list(self.lines)

    def wait_for_lines(self, count: int, timeout: float = 30.0) -> list[bytes]:
        """The lines received, once there are ``count``; fails after ``timeout``."""
        return _once_there_are(count, self.received, timeout)

    def stop(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
            conns, self._open = self._open, []
        if listener is not None:
            # shutdown wakes the accept() blocked in another thread.
            for sock in (listener, *conns):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
        for thread in self._threads:
            thread.join(10)
        self._threads = []


def write_certificates(
    directory: Path, name: str, usage: str = "serverAuth"
) -> tuple[Path, Path, Path]:
    """A CA named ``name`` and a server certificate it signed for ``localhost`` (and no
    address), made with the openssl command: ``(ca, certificate, key)``.  A client's
    certificate (mTLS) with ``usage="clientAuth"``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca = directory / f"{name}-ca.key", directory / f"{name}-ca.pem"
    key, csr, cert = directory / f"{name}.key", directory / f"{name}.csr", directory / f"{name}.pem"
    extensions = directory / f"{name}.ext"
    # Every extension strict verification (Python 3.13's default VERIFY_X509_STRICT)
    # asks of a CA and of a server certificate.
    extensions.write_text(
        "subjectAltName=DNS:localhost\nbasicConstraints=critical,CA:FALSE\n"
        f"keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage={usage}\n"
        "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid,issuer\n"
    )

    def openssl(*args: str | Path) -> None:
        subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca,
            "-days", "2", "-subj", f"/CN={name} test CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")  # fmt: skip
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
            "-subj", "/CN=localhost")  # fmt: skip
    openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
            "-out", cert, "-days", "2", "-extfile", extensions)  # fmt: skip
    return ca, cert, key


class Rsyslogd:
    """A real rsyslogd on loopback ports, writing ``%app-name% %procid% %msg%`` per line.

    Listens with imtcp (plain, and TLS through gtls when given certificates), imrelp,
    imudp and imuxsock on a socket of its own (never /dev/log); ``lines()`` reads what it wrote.
    The TCP ports stay the same across ``stop()`` and ``start()``.
    """

    def __init__(self, directory: Path, *, tls: tuple[Path, Path, Path] | None = None) -> None:
        assert RSYSLOGD is not None, "rsyslogd is not installed (Debian package rsyslog)"
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.tcp_port = free_port()
        self.tls_port = free_port() if tls is not None else None
        self.udp_port = free_port(socket.SOCK_DGRAM)
        self.relp_port = free_port()
        self.unix_path = directory / "log.sock"
        self.output = directory / "received.log"
        self.pid_file = directory / "rsyslogd.pid"
        self.config = directory / "rsyslog.conf"
        self.config.write_text(self._configuration(tls))
        self.process: subprocess.Popen[bytes] | None = None

    def _configuration(self, tls: tuple[Path, Path, Path] | None) -> str:
        # Every limit rsyslog has by default is lifted or raised: rate limits would drop
        # lines of a burst, and a short message size would cut long ones.
        parts = [
            'global(maxMessageSize="64k" workDirectory="%s"' % self.directory,
            (
                '  defaultNetstreamDriverCAFile="%s" defaultNetstreamDriverCertFile="%s"'
                ' defaultNetstreamDriverKeyFile="%s")' % tls
                if tls is not None
                else ")"
            ),
            'module(load="imuxsock" SysSock.Use="off")',
            'module(load="imudp")',
            'module(load="imtcp" maxSessions="100")',
            'input(type="imuxsock" socket="%s" useSpecialParser="off" parseHostname="on"'
            ' ratelimit.interval="0" createPath="on")' % self.unix_path,
            'input(type="imudp" address="127.0.0.1" port="%d" ratelimit.interval="0")'
            % self.udp_port,
            'input(type="imtcp" address="127.0.0.1" port="%d")' % self.tcp_port,
            'module(load="imrelp")',
            'input(type="imrelp" address="127.0.0.1" port="%d")' % self.relp_port,
        ]
        if tls is not None:
            parts.append(
                'input(type="imtcp" address="127.0.0.1" port="%d" streamDriver.name="gtls"'
                ' streamDriver.mode="1" streamDriver.authMode="anon")' % self.tls_port
            )
        parts += [
            'template(name="fields" type="string"'
            ' string="%app-name% %procid% %hostname% %pri% %msg%\\n")',
            'action(type="omfile" file="%s" template="fields" flushOnTXEnd="on"'
            ' asyncWriting="off")' % self.output,
        ]
        return "\n".join(parts) + "\n"

    def start(self) -> Rsyslogd:
        assert RSYSLOGD is not None
        with open(self.directory / "rsyslogd.stderr", "ab") as stderr:
            self.process = subprocess.Popen(
                [RSYSLOGD, "-n", "-f", str(self.config), "-i", str(self.pid_file)],
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        self._wait_listening()
        return self

    def _wait_listening(self) -> None:
        deadline = time.monotonic() + 20
        ports = [self.tcp_port, self.relp_port] + ([self.tls_port] if self.tls_port else [])
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(
                    f"rsyslogd exited with {self.process.returncode}: "
                    + (self.directory / "rsyslogd.stderr").read_text()
                )
            if all(_listening(port) for port in ports) and self.unix_path.exists():
                return
            if time.monotonic() > deadline:
                raise AssertionError("rsyslogd did not start listening within 20 s")
            time.sleep(0.02)

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if self.unix_path.exists():
            os.unlink(self.unix_path)

    def lines(self) -> list[str]:
        try:
            return self.output.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return []

    def wait_for_lines(self, count: int, timeout: float = 30.0) -> list[str]:
        """The lines rsyslogd wrote, once there are ``count``; fails after ``timeout``."""
        return _once_there_are(count, self.lines, timeout)


_Line = TypeVar("_Line", bytes, str)


def _once_there_are(count: int, read: Callable[[], list[_Line]], timeout: float) -> list[_Line]:
    deadline = time.monotonic() + timeout
    while len(found := read()) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(found)} of {count} lines arrived in {timeout} s")
        time.sleep(0.01)
    return found


class Collector(Protocol):
    def start(self) -> object: ...
    def stop(self) -> None: ...
    def wait_for_lines(self, count: int, timeout: float = 30.0) -> list[bytes] | list[str]: ...


def submit_paths(log: AccessLog, prefix: str, count: int) -> None:
    """Submit ``count`` records for ``/prefix/0``, ``/prefix/1``, ..."""
    for i in range(count):
        log.submit(make_record(path=f"/{prefix}/{i}".encode()))


def wait_for_retries(log: AccessLog, count: int, timeout: float = 30.0) -> None:
    """Wait until the log's sink has failed ``count`` attempts (and so is retrying)."""
    deadline = time.monotonic() + timeout
    while log.stats().write_errors < count:
        assert time.monotonic() < deadline, f"fewer than {count} failed attempts in {timeout} s"
        time.sleep(0.01)


def through_a_restart(log: AccessLog, collector: Collector, count: int) -> Stats:
    """``count`` records before the collector stops (all received), ``count`` while it is
    away, ``count`` after it is back; the final stats."""
    submit_paths(log, "before", count)
    assert log.flush(timeout=30)
    collector.wait_for_lines(count)
    collector.stop()
    submit_paths(log, "during", count)
    collector.start()
    submit_paths(log, "after", count)
    stats = log.close(timeout=60)
    assert stats.submitted == stats.written + stats.dropped + stats.filtered + stats.failed
    assert stats.queued == 0
    return stats


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


class DrippingServer:
    """A collector that holds the client up: a RELP server (``relp=True``) that answers
    ``open`` at once and then drips its answers one byte every ``every`` seconds, as a
    server stuck behind a full disk does; otherwise a reader that never reads, with a
    small receive buffer, so that the client's sends block once the buffers are full.

    ``ended`` is set when the client's connection ends (end of file or reset), which is
    the test's proof that the client let go of its socket.
    """

    def __init__(
        self, *, relp: bool, tls: ssl.SSLContext | None = None, every: float = 0.3
    ) -> None:
        self._relp = relp
        self._tls = tls
        self._every = every
        self.ended = threading.Event()
        self.socket_inodes: set[int] = set()
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        if not relp:
            self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.socket_inodes.add(os.fstat(self._listener.fileno()).st_ino)
        self.port: int = self._listener.getsockname()[1]
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def _accept(self) -> None:
        try:
            conn, _ = self._listener.accept()
        except OSError:
            return
        self.socket_inodes.add(os.fstat(conn.fileno()).st_ino)
        thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
        self._threads.append(thread)
        thread.start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            if self._tls is not None:
                conn = self._tls.wrap_socket(conn, server_side=True)
            if self._relp:
                self._drip(conn)
            else:
                self._hold(conn)
        except OSError:
            pass
        finally:
            conn.close()
            self.ended.set()

    def _drip(self, conn: socket.socket) -> None:
        opening = b""
        # The whole open frame: TXNR SP "open" SP DATALEN SP DATA LF.
        while (found := re.match(rb"\d+ open (\d+) ", opening)) is None or len(
            opening
        ) <= found.end() + int(found[1]):
            chunk = conn.recv(4096)
            if not chunk:
                return
            opening += chunk
        offers = b"200 OK\nrelp_version=0\ncommands=syslog"
        conn.sendall(b"1 rsp %d %s\n" % (len(offers), offers))
        conn.settimeout(self._every)
        number = 2
        while not self._stop.is_set():
            for byte in b"%d rsp 6 200 OK\n" % number:
                if self._client_left(conn):
                    return
                conn.sendall(bytes([byte]))
            number += 1

    def _client_left(self, conn: socket.socket) -> bool:
        """Read (and discard) what the client sent for ``every`` seconds: whether it
        closed or shut its side down."""
        try:
            while True:
                if not conn.recv(65536):
                    return True
        except TimeoutError:
            return self._stop.is_set()

    def _hold(self, conn: socket.socket) -> None:
        # Never reads; learns the end from a poll that sees the connection hung up.
        poller = select.poll()
        poller.register(conn, select.POLLRDHUP | select.POLLHUP | select.POLLERR)
        while not self._stop.is_set():
            if poller.poll(100):
                return

    def close(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        for thread in self._threads:
            thread.join(10)


def socket_inodes() -> set[int]:
    """The inodes of this process's open sockets."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith("socket:["):
                found.add(int(target[8:-1]))
    return found


# -- OTLP ---------------------------------------------------------------------------------


def otlp_json_request(body: bytes) -> ExportLogsServiceRequest:
    """An OTLP/JSON request as the official message: protobuf's JSON mapping but for the
    trace and span ids, which OTLP/JSON writes in hex where the mapping has base64."""

    def ids_in_base64(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                key: base64.b64encode(bytes.fromhex(value)).decode()
                if key in ("traceId", "spanId")
                else ids_in_base64(value)
                for key, value in node.items()
            }
        if isinstance(node, list):
            return [ids_in_base64(item) for item in node]
        return node

    return json_format.ParseDict(ids_in_base64(json.loads(body)), ExportLogsServiceRequest())


class OtlpCollector:
    """An OpenTelemetry collector for the OTLP sink's tests: an HTTP server on loopback
    that decodes each request with the official opentelemetry-proto messages.  What it
    received (each LogRecord), and the answers it gives:
    each request takes the next of ``answers`` (status, headers, rejected count), the
    last one for ever after, with ``payload`` (content type, body) instead of its own
    when given.  A body over ``most_body`` bytes (as sent) is answered 413
    without a look, as the OpenTelemetry Collector's ``max_request_body_size`` does."""

    def __init__(
        self,
        port: int,
        answers: list[tuple[int, dict[str, str], int]],
        most_body: int | None = None,
        idle_close: bool = False,
        payload: tuple[str, bytes] | None = None,
    ) -> None:
        self.port = port
        self.answers = answers
        self.most_body = most_body
        #: The size of each request's body, as sent (413 too).
        self.body_sizes: list[int] = []
        self.paths: list[str] = []
        self.records: list[Any] = []
        self.content_types: list[str] = []
        self.requests = 0
        self.service_names: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.got_some = threading.Event()
        given = payload
        #: With ``idle_close``: set each time the collector closed a connection.
        self.closed_one = threading.Event()
        self.connections = 0
        collector = self

        class Handler(BaseHTTPRequestHandler):
            # idle_close: HTTP/1.1, which keeps the connection open, and each connection
            # closed once answered, without a word (no Connection: close), as a
            # collector or a load balancer closes a connection left idle.
            protocol_version = "HTTP/1.1" if idle_close else "HTTP/1.0"

            def setup(self) -> None:
                super().setup()
                collector.connections += 1

            def finish(self) -> None:
                super().finish()
                if idle_close:
                    self.connection.close()
                    collector.closed_one.set()

            def do_POST(self) -> None:
                self.close_connection = idle_close
                body = self.rfile.read(int(self.headers["Content-Length"]))
                collector.body_sizes.append(len(body))
                if collector.most_body is not None and len(body) > collector.most_body:
                    self.send_response(413)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if self.headers["Content-Encoding"] == "gzip":
                    body = gzip.decompress(body)
                status, headers, rejecting = collector.next_answer()
                collector.requests += 1
                collector.headers.append(dict(self.headers))
                as_json = self.headers["Content-Type"] == "application/json"
                collector.content_types.append(self.headers["Content-Type"])
                if 200 <= status < 300:
                    request = (
                        otlp_json_request(body)
                        if as_json
                        else ExportLogsServiceRequest.FromString(body)
                    )
                    for resource_logs in request.resource_logs:
                        names = [
                            kv.value.string_value
                            for kv in resource_logs.resource.attributes
                            if kv.key == "service.name"
                        ]
                        collector.service_names.extend(names)
                        for scope_logs in resource_logs.scope_logs:
                            for log in scope_logs.log_records:
                                attributes = {kv.key: kv.value for kv in log.attributes}
                                collector.paths.append(attributes["url.path"].string_value)
                                collector.records.append(log)
                    answer = ExportLogsServiceResponse()
                    if rejecting:
                        answer.partial_success.rejected_log_records = rejecting
                        answer.partial_success.error_message = "too old"
                    payload = (
                        json_format.MessageToJson(answer).encode()
                        if as_json
                        else answer.SerializeToString()
                    )
                else:
                    payload = b"busy"
                content_type = "application/x-protobuf"
                if given is not None:
                    content_type, payload = given
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                collector.got_some.set()
                with contextlib.suppress(OSError):
                    # (A client that reads no more than it wants closes before the end.)
                    self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((LOOPBACK, port), Handler)

    def next_answer(self) -> tuple[int, dict[str, str], int]:
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


@contextmanager
def otlp_collector(
    answers: list[tuple[int, dict[str, str], int]] | None = None,
    port: int | None = None,
    tls: tuple[Path, Path] | None = None,
    most_body: int | None = None,
    idle_close: bool = False,
    payload: tuple[str, bytes] | None = None,
    client_ca: Path | None = None,
) -> Iterator[OtlpCollector]:
    """A running :class:`OtlpCollector`; ``payload`` (content type, body): what each
    answer carries instead of its own; with ``tls`` and ``client_ca``, a client must
    show a certificate that CA signed (mTLS)."""
    running = OtlpCollector(
        port or free_port(), answers or [(200, {}, 0)], most_body, idle_close, payload
    )
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*map(str, tls))
        if client_ca is not None:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(str(client_ca))
        running.server.socket = context.wrap_socket(running.server.socket, server_side=True)
    thread = threading.Thread(target=running.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield running
    finally:
        running.server.shutdown()
        running.server.server_close()
        thread.join()
