"""The client behind trusted proxies, from ``X-Forwarded-For`` or ``Forwarded``, on the writer thread.

A server reports its peer: behind a reverse proxy, the proxy.  The proxy says who its
own peer was in a header, but any client can send that header too, so it is believed
only from the addresses the log was told to trust, and only as far as it was written by
them.  Each proxy appends the address it saw, so the chain is read from the right: the
right-most address that is not itself a trusted proxy is the client (a client's own
additions stand to its left, and are never read, so nothing a client writes there can
change what is logged).  When every address is trusted, the left-most is the client;
at most :data:`MAX_HOPS` elements are read, and a longer chain of trusted proxies ends
the walk at the last one read.

Exactly one header is read, the one the proxies set: ``X-Forwarded-For`` by default
(what nginx, HAProxy, AWS ALB, Caddy and Traefik append to), or ``Forwarded`` (RFC
7239).  The other is never consulted, not even when the chosen one is missing: the
proxies pass it through from the client unchanged, so falling back to it would let a
client choose its logged address.  Ports are dropped.  The identifiers RFC 7239 allows
in place of an address (``unknown``, or an obfuscated ``_name``) are logged as they
are, since the proxy chose to hide the address; an element that names neither an
address nor an identifier (malformed, or a ``Forwarded`` element without ``for=``) ends
the walk at the nearest trusted proxy.  With nothing trusted (the default) the peer is
logged and no header is read.

The entry ``"unix"`` trusts the peer of a Unix-socket connection (nginx in front of
gunicorn or uvicorn on the same host), which servers report without an address: None
(uvicorn, hypercorn), an empty string (gunicorn, granian, aiohttp) or ``"localhost"``
(waitress).  No server reports a TCP peer that way.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Iterator
from operator import itemgetter

from .._errors import ConfigurationError
from .._options import PROXY_HEADERS
from ..record._headers import HeaderReader
from ..record._record import CLIENT, REQUEST_HEADERS, Headers, Record, new_record

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

#: The ``trusted_proxies`` entry that trusts a Unix-socket peer.
UNIX = "unix"
#: The most elements of a forwarding header read, from the right: far more proxies than
#: any chain has, and a bound on the work a header costs whoever sends it.
MAX_HOPS = 32
# What servers report as a Unix-socket peer's address (None aside).
_UNIX_PEERS = frozenset(("", "localhost"))
# The peers seen so far and whether they are trusted, the forwarding header values seen
# so far and the clients they name, and the addresses read from them and what they
# mean (parsing an address costs microseconds, and the same peers, proxies and clients
# come back); each cache is emptied when it reaches this size.
_CACHE_SIZE = 4096
# Values longer than this are not kept as keys, so the values' cache holds at most
# _CACHE_SIZE times this many bytes of what clients sent: a chain of a few proxies is
# far shorter, and a longer value costs little more to read from the right.
_CACHED_VALUE_LENGTH = 256
# Longer than any address with brackets, port and IPv6 zone: not read as an address
# (nor kept in the cache, whose keys are therefore this short).
_LONGEST_NODE = 96
_OBFUSCATED = re.compile(r"_[A-Za-z0-9._-]+")
_PORT = re.compile(r"[0-9]{1,5}|_[A-Za-z0-9._-]+")
# One parameter of a Forwarded element: name=token or name="quoted string", then the
# ";" before the next one or the element's end.
_PARAMETER = re.compile(
    rb'[ \t]*([!#$%&\'*+.^_`|~0-9A-Za-z-]+)=("(?:[^"\\]|\\.)*"|[!#$%&\'*+.^_`|~0-9A-Za-z:\[\]-]*)'
    rb"[ \t]*(?:;[ \t]*|\Z)"
)
_QUOTED_PAIR = re.compile(rb"\\(.)", re.DOTALL)
_WHITESPACE = b" \t"
_client = itemgetter(CLIENT)


class TrustedProxies:
    """Replaces a trusted peer by the client it forwarded for; false when none is trusted."""

    __slots__ = ("_clients", "_judged", "_networks", "_nodes", "_peers", "_reader", "_unix")

    def __init__(self, entries: Iterable[object], *, header: str = PROXY_HEADERS[0]) -> None:
        name = _proxy_header(header)
        entries = list(entries)
        self._unix = any(_is_unix(entry) for entry in entries)
        self._networks = tuple(_network(entry) for entry in entries if not _is_unix(entry))
        self._peers: dict[str, bool] = {}
        # By header value: the client, or None for the peer.
        self._clients: dict[bytes, str | None] = {}
        # By node as written: what it logs (None: not an address, the walk ends) and
        # whether the walk ends there.
        self._judged: dict[bytes, tuple[str | None, bool]] = {}
        self._reader = HeaderReader((name,))
        self._nodes = _forwarded_nodes if name == "forwarded" else _forwarded_for_nodes

    @property
    def request_header_names(self) -> frozenset[bytes]:
        """The forwarding header field it reads."""
        return frozenset(self._reader.names)

    def __bool__(self) -> bool:
        return bool(self._networks) or self._unix

    def __call__(self, batch: list[Record]) -> None:
        """Give each record of ``batch`` from a trusted peer its forwarded client, in place."""
        peers = self._peers
        unix = self._unix
        for index, peer in enumerate(map(_client, batch)):
            trusted: bool | None
            if peer is None:
                trusted = unix  # uvicorn and hypercorn report a Unix-socket peer as None
            else:
                trusted = peers.get(peer)
                if trusted is None:
                    trusted = self._learn(peer)
            if trusted:
                record = batch[index]
                client = self.client(peer, record[REQUEST_HEADERS])
                if client != peer:
                    batch[index] = new_record(
                        Record, (*record[:CLIENT], client, *record[CLIENT + 1 :])
                    )

    def trusts(self, address: str) -> bool:
        """Whether ``address`` (an IP address as text) is one of the trusted proxies."""
        try:
            return self._contains(ipaddress.ip_address(address))
        except ValueError:
            return False  # a Unix socket's path, say

    def _contains(self, ip: IPAddress) -> bool:
        if ip.version == 6 and ip.ipv4_mapped is not None:
            # A dual-stack socket reports IPv4 peers as ::ffff:a.b.c.d.
            ip = ip.ipv4_mapped
        return any(ip in network for network in self._networks)

    def client(self, peer: str | None, headers: Headers) -> str | None:
        """The client a trusted ``peer`` forwarded for, according to ``headers``."""
        (value,) = self._reader.values(headers)
        if value is None:
            return peer
        if len(value) > _CACHED_VALUE_LENGTH:
            return self._forwarded_client(value) or peer
        clients = self._clients
        if value in clients:
            return clients[value] or peer
        if len(clients) >= _CACHE_SIZE:
            clients.clear()
        client = clients[value] = self._forwarded_client(value)
        return client or peer

    def _forwarded_client(self, value: bytes) -> str | None:
        """The client the header's ``value`` names, or None where it leaves it to the peer."""
        client = None
        judged = self._judged
        for hop, element in enumerate(self._nodes(value)):
            if hop == MAX_HOPS or element is None:
                break  # too long a chain, or a proxy that did not say who its peer was
            element = element.strip(_WHITESPACE)
            if not element:
                continue  # an empty list element (RFC 9110 5.6.1)
            logged, last = judged.get(element) or self._judge(element)
            if logged is None:
                break
            if last:
                return logged
            client = logged
        return client

    def _judge(self, element: bytes) -> tuple[str | None, bool]:
        """What a node logs, and whether it ends the walk (anything but a trusted proxy)."""
        node = _node(element)
        if node is None or isinstance(node, str):
            judged = (node, True)
        else:
            judged = (str(node), not self._contains(node))
        if len(element) <= _LONGEST_NODE:
            if len(self._judged) >= _CACHE_SIZE:
                self._judged.clear()
            self._judged[element] = judged
        return judged

    def _learn(self, peer: str) -> bool:
        if len(self._peers) >= _CACHE_SIZE:
            self._peers.clear()
        trusted = self._peers[peer] = self._unix if peer in _UNIX_PEERS else self.trusts(peer)
        return trusted


def _is_unix(entry: object) -> bool:
    return isinstance(entry, str) and entry.strip().lower() == UNIX


def _network(entry: object) -> IPNetwork:
    if not isinstance(entry, str):
        raise _not_an_address(entry)
    try:
        return ipaddress.ip_network(entry.strip())
    except ValueError:
        pass
    # Host bits set ("10.0.0.1/8"): it may mean the network or the one address.
    try:
        network = ipaddress.ip_network(entry.strip(), strict=False)
    except ValueError:
        raise _not_an_address(entry) from None
    address = entry.strip().partition("/")[0]
    raise ConfigurationError(
        f"trusted_proxies entry {entry!r} has host bits set: write the network "
        f"{str(network)!r} or the single address {address!r}"
    )


def _not_an_address(entry: object) -> ConfigurationError:
    return ConfigurationError(
        f"trusted_proxies entry {entry!r} is not an IP address or network: give "
        "addresses or CIDR ranges as text, e.g. ['127.0.0.1', '10.0.0.0/8', 'fd00::/8'], "
        f"or {UNIX!r} for a proxy on a Unix socket"
    )


def _proxy_header(header: object) -> str:
    if isinstance(header, str) and header.lower() in PROXY_HEADERS:
        return header.lower()
    raise ConfigurationError(
        f"proxy_header {header!r} is not a forwarding header boundlog reads: choose "
        "'x-forwarded-for' (nginx, HAProxy, AWS ALB, Caddy, Traefik) or 'forwarded' "
        "(RFC 7239), whichever your proxies set"
    )


def _forwarded_for_nodes(value: bytes) -> Iterator[bytes]:
    """The addresses of an X-Forwarded-For value as written, right-most first."""
    end = len(value)
    while end >= 0:
        comma = value.rfind(b",", 0, end)
        yield value[comma + 1 : end]
        end = comma


def _forwarded_nodes(value: bytes) -> Iterator[bytes | None]:
    """The ``for=`` node of each element of a Forwarded value, right-most first; None for
    an element that has none or is malformed (the walk ends there)."""
    # Each element is found by searching back from its end for the "," before it, past
    # quoted strings, so that it costs what its own length does, whatever stands to
    # its left.
    end = len(value)
    comma = value.rfind(b",", 0, end)
    quote = value.rfind(b'"', 0, end)
    while True:
        while quote > comma:
            # The quote closes a quoted string, which may hold commas.
            opening = _opening_quote(value, quote)
            if opening < 0:
                yield None
                return
            quote = value.rfind(b'"', 0, opening)
            if comma > opening:
                comma = value.rfind(b",", 0, opening)
        yield _for_node(value[comma + 1 : end])
        if comma < 0:
            return
        end = comma
        comma = value.rfind(b",", 0, end)


def _opening_quote(value: bytes, closing: int) -> int:
    """Where the quoted string ending at ``closing`` starts, or -1."""
    position = closing
    while (position := value.rfind(b'"', 0, position)) >= 0:
        backslashes = 0
        while value[position - backslashes - 1 : position - backslashes] == b"\\":
            backslashes += 1
        if backslashes % 2 == 0:
            return position  # an odd run of backslashes escapes the quote
    return -1


def _for_node(element: bytes) -> bytes | None:
    """The ``for=`` node of one Forwarded element (empty for an empty element), or None."""
    if not element.strip(_WHITESPACE):
        return b""
    node = None
    position = 0
    while position < len(element):
        match = _PARAMETER.match(element, position)
        if match is None or match.end() == position:
            return None
        name, raw = match.group(1, 2)
        if name.lower() == b"for":
            node = _QUOTED_PAIR.sub(rb"\1", raw[1:-1]) if raw.startswith(b'"') else raw
        position = match.end()
    return node or None


def _node(element: bytes) -> IPAddress | str | None:
    """The address (without port) or the identifier an element names; None if neither."""
    if len(element) > _LONGEST_NODE:
        return None
    text = element.decode("latin-1")
    host, port = text, ""
    if text.startswith("["):
        host, bracket, port = text[1:].partition("]")
        if not bracket or (port and not port.startswith(":")):
            return None
        port = port[1:]
        if not host or ":" not in host:
            return None
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    if port and not _PORT.fullmatch(port):
        return None
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if host.lower() == "unknown":
        return "unknown"
    return host if _OBFUSCATED.fullmatch(host) else None
