"""Network sinks: a connection the writer thread makes, keeps and remakes.

A :class:`NetworkSink` is a sink like a file: the writer hands it a batch of lines and
it returns once they are sent.  What differs is inside ``write``: it connects when it
has no connection (never before, so building a log never waits for the network nor
fails because the collector is down), sends the batch in as few system calls as the
framing allows, and on any error drops the connection and tries again, with capped
exponential backoff and jitter, until the batch is sent or ``close()`` gives up on it.
Meanwhile the writer takes no further batch, so records wait in the queue exactly as
they do behind a slow disk: ``drop`` counts what does not fit, ``wait`` holds requests
back, and the request path never touches a socket.

"Sent" means handed to the kernel (the kernel's send buffer may still hold it when
the peer dies: docs/shipping.md gives the bound).  A line the kernel took before a
connection failed is counted as written; the line cut short by the failure is sent again,
whole, on the next connection.  Over RELP (``_relp``) "sent" means acknowledged by the
server, and what it did not acknowledge is sent again on the next session.

Over RELP ``write`` returns once the batch is in flight, before its answers: up to
``_relp.WINDOW`` messages wait for theirs while the next batches go out.  The sink
``confirms_later``: it counts the acknowledged messages in ``confirmed``, which the writer
folds into its counters, and ``settle()`` waits for the rest (flush, close, an idle
writer).  What was in flight when a session broke is sent again on the next one.
"""

from __future__ import annotations

import _socket
import bisect
import collections
import contextlib
import itertools
import os
import random
import select
import socket
import ssl
import threading
from collections.abc import Callable

from .._errors import ConfigurationError
from .._options import seconds, whole_number
from ._outages import OutageReports
from ._pathless import Pathless
from ._relp import RelpError, RelpSession, Stopped
from ._syslog import (
    FACILITIES,
    SEVERITIES,
    Syslog,
    code,
    datagrams,
    default_app_name,
    default_hostname,
    header_field,
    line_ends,
    octet_counted,
)
from ._urls import parse_url

# How long a blocked send waits before it looks whether close() gave up on it.
_LOOK_EVERY = 0.5
# RFC 5426 3.2: a receiver SHOULD take 2048-octet datagrams, over IPv4 and IPv6; rsyslog
# takes 8 KiB from its local socket by default.
_DATAGRAM_LIMITS = {"udp": 2048, "unix": 8192}
# The largest UDP payload over IPv4 (65,535 less the IP and UDP headers).
_LARGEST_UDP = 65507
# rsyslog's maxMessageSize by default (8 KiB): a collector takes what is past its limit
# as another message (see _syslog.octet_counted).
_STREAM_MESSAGE_LIMIT = 8192


class NetworkSink(Pathless):
    """A sink that sends lines to a collector: ``boundlog.NetworkSink("syslog://host:514")``.

    Pass it as ``AccessLog(sink=...)`` for options a URL cannot carry; a URL string as
    ``sink=`` makes one with the defaults.  ``ssl_context`` (tls:// and syslog+tls://)
    replaces the default, which verifies the server's certificate against the system's
    store and its host name.  ``app_name``, ``facility``, ``severity`` and ``hostname``
    are RFC 5424 header fields (syslog and relp schemes only).  ``connect_timeout`` bounds a
    connection attempt; after a failure the next attempt comes after ``retry_initial``
    seconds, doubling up to ``retry_max``, each wait a random 50 to 100 % of that.
    ``max_datagram`` (syslog+udp, syslog+unix) and ``max_message`` (syslog, syslog+tls:
    the collector's maximum message size) are the longest message sent: a longer one is
    cut, counted in ``truncated`` and reported.
    """

    def __init__(
        self,
        url: str,
        *,
        ssl_context: ssl.SSLContext | None = None,
        app_name: str | None = None,
        facility: str | int = "local7",
        severity: str | int = "info",
        hostname: str | None = None,
        connect_timeout: float = 10.0,
        retry_initial: float = 0.5,
        retry_max: float = 30.0,
        max_datagram: int | None = None,
        max_message: int | None = None,
    ) -> None:
        address = parse_url(url)
        self.address = address
        self.name = address.url
        tls = address.transport == "tls"
        if ssl_context is not None and not tls:
            raise ConfigurationError(
                f"ssl_context is for tls:// and syslog+tls://, not {address.scheme}://"
            )
        if ssl_context is not None and not isinstance(ssl_context, ssl.SSLContext):
            raise ConfigurationError(f"ssl_context must be an ssl.SSLContext, not {ssl_context!r}")
        # Made here, not at the first connection: reading the system's certificates is
        # local, and a broken store is a configuration error to see at startup.
        self._ssl_context = (ssl_context or ssl.create_default_context()) if tls else None
        syslog_options = {"app_name": app_name, "hostname": hostname}
        if address.framing == "lines":
            given = [name for name, value in syslog_options.items() if value is not None]
            if facility != "local7" or severity != "info":
                given.append("facility" if facility != "local7" else "severity")
            if given:
                raise ConfigurationError(
                    f"{', '.join(given)}: syslog header fields, for syslog URLs, "
                    f"not {address.scheme}://"
                )
        self._syslog = Syslog(
            facility=code("facility", facility, FACILITIES),
            severity=code("severity", severity, SEVERITIES),
            hostname=default_hostname()
            if hostname is None
            else header_field("hostname", hostname, 255),
            app_name=default_app_name()
            if app_name is None
            else header_field("app_name", app_name, 48),
        )
        self._connect_timeout = _positive("connect_timeout", connect_timeout, example=10.0)
        # Not 0: a collector that refuses at once would be retried in a tight loop.
        self._retry_initial = _positive("retry_initial", retry_initial, example=0.5)
        self._retry_max = max(_positive("retry_max", retry_max, example=30.0), self._retry_initial)
        datagram = address.transport in _DATAGRAM_LIMITS
        if max_datagram is not None:
            if not datagram:
                raise ConfigurationError(
                    f"max_datagram is for syslog+udp:// and syslog+unix://, not {address.scheme}://"
                )
            max_datagram = whole_number("max_datagram", max_datagram, example=2048, minimum=480)
            if address.transport == "udp" and max_datagram > _LARGEST_UDP:
                raise ConfigurationError(
                    f"max_datagram must be at most {_LARGEST_UDP} (the largest UDP payload "
                    f"over IPv4), not {max_datagram}: e.g. max_datagram=8192"
                )
        stream_syslog = address.framing == "syslog" and not datagram
        if max_message is not None:
            if not stream_syslog:
                raise ConfigurationError(
                    f"max_message is for syslog:// and syslog+tls://, not {address.scheme}://"
                    + (" (max_datagram sets a datagram's)" if datagram else "")
                )
            max_message = whole_number("max_message", max_message, example=65536, minimum=480)
        if datagram:
            self._max_message = max_datagram or _DATAGRAM_LIMITS[address.transport]
            self._limit_option = "max_datagram"
        else:
            self._max_message = max_message or (_STREAM_MESSAGE_LIMIT if stream_syslog else 0)
            self._limit_option = "max_message"
        self._datagram = datagram
        self._waiting: Callable[[], int] = lambda: 0
        #: RELP's messages are written once the server acknowledges them, after
        #: ``write`` returned (see sinks._files.Destination).
        self.confirms_later = address.framing == "relp"
        self._start_afresh()

    def _start_afresh(self) -> None:
        self._relp: RelpSession | None = None
        #: Messages cut to ``max_datagram`` (by this process).
        self.truncated = 0
        #: Connection and send attempts that failed (``Stats.write_errors`` adds them).
        self.retries = 0
        self._sock: socket.socket | None = None
        # The socket the writer thread uses or is connecting, for close() giving up to
        # shut down: a recv or send blocked on it returns at once, where the socket
        # timeout alone would not end a wait on a peer that drips one byte at a time.
        # Taken and closed under the lock, so that the descriptor shut down is never
        # one the writer closed and the process reused meanwhile.
        self._active: socket.socket | None = None
        self._active_lock = threading.Lock()
        self._stop = threading.Event()
        # Cuts a wait between attempts short: set by close() giving up, and by hurry().
        self._wake = threading.Event()
        self._pid = os.getpid()
        # The batch under way: bytes sent of it, and the frame and line ends that map
        # them to whole lines.
        self._sent = 0
        self._frame_ends: list[int] = []
        self._data_ends: list[int] = []
        self._delay = 0.0
        self._reports = OutageReports(self.name)
        self._unreported_cuts = 0
        # The records of the last batch sent on the current connection, and how many
        # batches it carried (stream transports), for _at_risk.
        self._last_batch_lines = 0
        self._batches_on_connection = 0
        # RELP: the messages handed over by write() and not yet acknowledged, oldest
        # first (the session has the first ``outstanding`` of them in flight; a new
        # session sends them all again), and how many were acknowledged in all.
        self._unacknowledged: collections.deque[bytes] = collections.deque()
        #: Lines acknowledged so far (RELP): a running total the writer thread moves.
        self.confirmed = 0

    # The attributes and methods the writer uses (see sinks._files.Destination).

    #: Setting ``stopped`` shuts the socket down, which wakes a writer blocked on it.
    wakes_when_stopped = True

    @property
    def stopped(self) -> bool:
        """Set by close() when it gives up: no further attempt nor send is started."""
        return self._stop.is_set()

    @stopped.setter
    def stopped(self, value: bool) -> None:
        if not value:
            self._stop.clear()
            return
        with self._active_lock:
            self._stop.set()
            self._wake.set()
            if self._active is not None:
                with contextlib.suppress(OSError):
                    # The plain socket's call, not SSLSocket.shutdown, which would
                    # drop the TLS state under the writer thread's feet.
                    _socket.socket.shutdown(self._active, socket.SHUT_RDWR)

    @property
    def delivered(self) -> int:
        """How far into the batch under way the lines went out whole, in its bytes."""
        whole = bisect.bisect_right(self._frame_ends, self._sent)
        return self._data_ends[whole - 1] if whole else 0

    @delivered.setter
    def delivered(self, value: int) -> None:
        # The writer zeroes it before each batch; write() starts its own count.
        self._sent = value

    def outage(self) -> str | None:
        """What the last failed attempt to reach the receiver said, while it is away."""
        return self._reports.last_failure

    def watch_backlog(self, waiting: Callable[[], int]) -> None:
        """Learn how to count the records waiting behind this sink, for reports."""
        self._waiting = waiting

    def hurry(self) -> None:
        """Try again now rather than at the end of the wait: flush() or close() is
        waiting, and a collector that came back during a 30 s wait would otherwise
        be tried only after close_timeout gave up."""
        self._wake.set()

    def after_fork(self) -> None:
        """In a forked child: forget the parent's connection and open one of its own.

        The descriptor is closed without a word on it (no shutdown, no TLS close_notify),
        which would end the parent's connection too.
        """
        sock = self._sock
        self._start_afresh()
        if sock is not None:
            with contextlib.suppress(OSError):
                os.close(sock.detach())

    def close(self) -> None:
        """Close the connection, if any (a RELP session with its ``close`` command)."""
        if self._relp is not None and not self.stopped:
            with contextlib.suppress(OSError):
                self._relp.close()
        self._disconnect()

    def write(self, data: bytes) -> tuple[int, OSError | None]:
        """Send ``data`` whole, reconnecting as often as it takes, until sent or stopped.

        Never returns an error: a failure is retried, and the writer learns only of the
        end, or, through ``delivered``, how far it got when close() gave up.  Over RELP
        "sent" is "in flight": the writer learns of the answers through ``confirmed``.
        """
        if os.getpid() != self._pid:
            self.after_fork()
        framing = self.address.framing
        header = self._syslog.header() if framing != "lines" else b""
        if framing == "relp":
            messages, _, _ = datagrams(header, data, None)
            # Nothing of the batch counts as delivered until confirmed (``confirmed``).
            self._frame_ends = self._data_ends = []
            self._unacknowledged.extend(messages)
            return self._deliver(data, 1, self._put_in_flight)
        if self._datagram:
            messages, self._data_ends, cut = datagrams(header, data, self._max_message)
            self._frame_ends = list(range(1, len(messages) + 1))
            if cut:
                self._count_cuts(cut)

            def step(sock: socket.socket) -> int:
                sock.send(messages[self._sent])
                return 1

            return self._deliver(data, len(messages), step)
        if framing == "syslog":
            buffer, self._frame_ends, self._data_ends, cut = octet_counted(
                header, data, self._max_message
            )
            if cut:
                self._count_cuts(cut)
        else:
            buffer = data
            self._frame_ends = self._data_ends = line_ends(data)
        view = memoryview(buffer)

        def send(sock: socket.socket) -> int:
            if self._sent == 0:
                gone = _peer_gone(sock, self.address.scheme)
                if gone is not None:
                    raise ConnectionResetError(0, self._at_risk(gone))
            return sock.send(view[self._sent :])

        result = self._deliver(data, len(buffer), send)
        self._last_batch_lines = len(self._data_ends)
        self._batches_on_connection += 1
        return result

    def _at_risk(self, gone: str) -> str:
        """What to say of a connection the collector ended: the last batch sent on it
        is counted written (handed to the kernel), but a collector that hangs up may
        not have read it; and one that hangs up right after a connection's first batch
        may be hanging up on every one (another protocol's port, a client it refuses),
        reading none: said, since the counts cannot say it."""
        sent, batches = self._last_batch_lines, self._batches_on_connection
        if not sent:
            return gone
        scheme = self.address.scheme
        said = (
            f"{gone}; the {sent} record(s) of the last batch sent on that connection "
            f"may not have been read (a {scheme}:// collector does not say what it read; "
            "relp:// does)"
        )
        if batches == 1:
            said += (
                f"; if this repeats, is {self.address.host}:{self.address.port} another "
                f"protocol's port (TLS: {'tls' if scheme == 'tcp' else 'syslog+tls'}://, "
                "RELP: relp://), or one that refuses this client?"
            )
        return said

    def settle(self) -> None:
        """Wait until the server acknowledged every message handed over (RELP), through
        as many sessions as it takes, or until close() gives up (``stopped``)."""
        if not self._unacknowledged:
            return

        def drain(sock: socket.socket) -> int:
            self._put_in_flight(sock)
            assert self._relp is not None
            self._relp.drain(self._acknowledged)
            return 1

        self._frame_ends = self._data_ends = []
        self._deliver(b"", 1, drain)

    def _put_in_flight(self, sock: socket.socket) -> int:
        """Send the messages handed over that this session has not sent yet: all of
        them on a new session."""
        relp = self._relp
        assert relp is not None
        unsent = list(itertools.islice(self._unacknowledged, relp.outstanding, None))
        relp.send(unsent, self._acknowledged)
        return 1

    def _acknowledged(self, count: int) -> None:
        popleft = self._unacknowledged.popleft
        for _ in range(count):
            popleft()
        self.confirmed += count

    def _deliver(
        self, data: bytes, total: int, step: Callable[[socket.socket], int]
    ) -> tuple[int, OSError | None]:
        """Run ``step`` (a send: bytes, or one datagram) until ``total`` is sent or stopped."""
        self._sent = 0
        while self._sent < total:
            # What a hurry() asks for is the attempt about to start.
            self._wake.clear()
            if self.stopped:
                self._disconnect()
                return self.delivered, None
            sock = self._sock or self._connect()
            if sock is None:
                continue
            try:
                self._sent += step(sock)
            except (TimeoutError, Stopped):
                continue  # blocked by a slow reader: look at stopped, then go on
            except OSError as error:
                if self.stopped:
                    # Most likely close() shutting the socket down: no retry, and
                    # no report after the final totals.
                    continue
                self._failed("cannot send to", error)
                # What the kernel took of a line cut short is resent with all of it.
                whole = bisect.bisect_right(self._frame_ends, self._sent)
                self._sent = self._frame_ends[whole - 1] if whole else 0
        if not self.stopped:
            self._reports.recovered()
        return len(data), None

    def _count_cuts(self, cut: int) -> None:
        self.truncated += cut
        self._unreported_cuts += cut
        if self._reports.report(
            f"cut {self._unreported_cuts} message(s) to {self._max_message} bytes "
            f"for {self.name} ({self._limit_option})"
        ):
            self._unreported_cuts = 0

    def _connect(self) -> socket.socket | None:
        """A new connection, or None after a failure reported and waited out."""
        address = self.address
        sock: socket.socket | None = None
        # What a timeout interrupted: a connected peer that answers no TLS handshake
        # or RELP open is most likely a plain port (the URL's scheme mistaken).
        awaited = None
        try:
            if address.transport == "unix":
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                sock.settimeout(self._connect_timeout)
                sock.connect(address.path)
            elif address.transport == "udp":
                sock = _udp_connection(address.host, address.port)
            else:
                sock = self._tcp_connection(address.host, address.port)
                if sock is None:
                    return None
                # Dead peers behind a silent network are found within hours rather
                # than never.
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
                if self._ssl_context is not None:
                    # The handshake apart: a failed one must not close the descriptor
                    # outside the lock (wrap_socket does), and it is interruptible
                    # once the TLS socket is the one close() may shut down.
                    plain = sock
                    sock = self._ssl_context.wrap_socket(
                        plain, server_hostname=address.host, do_handshake_on_connect=False
                    )
                    if not self._hold(sock, replacing=plain):
                        return None
                    awaited = "TLS handshake"
                    sock.do_handshake()
                if address.framing == "relp":
                    self._relp = RelpSession(sock, lambda: self.stopped)
                    awaited = "RELP open"
                    self._relp.open()
            sock.settimeout(_LOOK_EVERY)
        except Stopped:
            self._release(sock)
            return None
        except (OSError, ssl.CertificateError) as error:
            self._release(sock)
            if self.stopped:
                return None  # close() gave up: no retry, nothing more to report
            if isinstance(error, TimeoutError) and awaited is not None:
                meant = "syslog://" if address.framing != "lines" else "tcp://"
                what = f"no {awaited.split()[0]} session with"
                error = OSError(
                    0,
                    f"connected, but no answer to the {awaited} within "
                    f"{self._connect_timeout:g} s: is it a plain port ({meant})?",
                )
            elif isinstance(error, ssl.SSLError):
                what = "TLS handshake failed with"
            elif isinstance(error, RelpError):
                what = "RELP session refused by"
            else:
                what = "cannot connect to"
            self._failed(what, error)
            return None
        self._sock = sock
        self._last_batch_lines = self._batches_on_connection = 0
        return sock

    def _tcp_connection(self, host: str, port: int) -> socket.socket | None:
        """As socket.create_connection, each socket held (see _hold) while it connects;
        None if close() gave up meanwhile."""
        error: OSError = OSError(f"{host} has no address")
        for family, kind, proto, _, where in socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM
        ):
            sock = socket.socket(family, kind, proto)
            if not self._hold(sock):
                return None
            try:
                sock.settimeout(self._connect_timeout)
                sock.connect(where)
            except OSError as refused:
                self._release(sock)
                if self.stopped:
                    return None
                error = refused
                continue
            return sock
        raise error

    def _hold(self, sock: socket.socket, *, replacing: socket.socket | None = None) -> bool:
        """Make ``sock`` the one close() shuts down; False (and ``sock`` closed) if it
        gave up already."""
        with self._active_lock:
            if self._stop.is_set():
                if self._active is replacing:
                    self._active = None
                with contextlib.suppress(OSError):
                    sock.close()
                return False
            self._active = sock
            return True

    def _release(self, sock: socket.socket | None) -> None:
        """Close ``sock`` (a socket held or not yet held) under the lock."""
        if sock is None:
            return
        with self._active_lock:
            if sock is self._active:
                self._active = None
            with contextlib.suppress(OSError):
                sock.close()

    def _disconnect(self) -> None:
        self._relp = None
        sock, self._sock = self._sock, None
        self._release(sock)

    def _failed(self, what: str, error: BaseException) -> None:
        """Drop the connection, report (now and then) and wait before the next attempt."""
        self._disconnect()
        self.retries += 1
        first = self._reports.failures == 0
        self._delay = self._retry_initial if first else min(self._delay * 2, self._retry_max)
        wait = self._delay * random.uniform(0.5, 1.0)
        if self.confirms_later:
            unsent = len(self._unacknowledged)
        else:
            unsent = len(self._frame_ends) - bisect.bisect_right(self._frame_ends, self._sent)
        self._reports.failed(
            f"{what} {self.name}: {cause_of(error)}", wait, self._waiting() + unsent
        )
        # Not cleared here: a hurry() that came during the attempt skips this wait.
        self._wake.wait(wait)

    def __repr__(self) -> str:
        return f"<NetworkSink {self.name}>"


def _positive(name: str, value: object, *, example: float) -> float:
    seconds_given = seconds(name, value, example=example)
    if seconds_given == 0:
        raise ConfigurationError(f"{name} must be more than 0 seconds: e.g. {name}={example}")
    return seconds_given


def _udp_connection(host: str, port: int) -> socket.socket:
    error: OSError = OSError(f"{host} has no address")
    for family, kind, proto, _, where in socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM):
        sock = socket.socket(family, kind, proto)
        try:
            sock.connect(where)
        except OSError as refused:
            sock.close()
            error = refused
            continue
        return sock
    raise error


def _peer_gone(sock: socket.socket, scheme: str) -> str | None:
    """Why the connection is over since the last batch (the collector closed it, reset
    it, or spoke), or None while it is alive.

    Collectors send nothing on these connections, so a readable socket means an end of
    file, an error, or a peer of another protocol (a TLS server's alert, a RELP
    server's answer); one poll per batch finds it before the batch goes into a dead
    connection's send buffer, where it would be counted sent.
    """
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    if not poller.poll(0):
        return None
    try:
        if isinstance(sock, ssl.SSLSocket):
            # TLS 1.3 servers send session tickets after the handshake: readable, alive.
            sock.setblocking(False)
            try:
                spoken = sock.recv(4096)
            except ssl.SSLWantReadError:
                return None
            finally:
                sock.settimeout(_LOOK_EVERY)
        else:
            spoken = sock.recv(4096, socket.MSG_DONTWAIT)
    except BlockingIOError:
        return None
    except OSError:
        return "the collector reset the connection"
    if not spoken:
        return "the collector closed the connection"
    hint = (
        " (a TLS alert: the port speaks TLS)"
        if spoken[:1] == b"\x15" and spoken[1:2] == b"\x03"
        else ""
    )
    return (
        f"the collector sent {len(spoken)} byte(s) {spoken[:16]!r}{hint}, which a "
        f"{scheme}:// collector never does"
    )


def cause_of(error: BaseException) -> str:
    """What went wrong, in a few words, for a report on stderr."""
    if isinstance(error, ssl.SSLCertVerificationError):
        return f"certificate verify failed: {error.verify_message}"
    if isinstance(error, ssl.SSLError):
        return error.reason or str(error)
    if isinstance(error, TimeoutError):
        return "timed out"
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error) or type(error).__name__
