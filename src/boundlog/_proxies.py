"""The client behind trusted proxies, from ``X-Forwarded-For`` or ``Forwarded``, on the writer thread.

A server reports its peer: behind a reverse proxy, the proxy.  The proxy says who its
own peer was in a header, but any client can send that header too, so it is believed
only from the addresses the log was told to trust, and only as far as it was written by
them.  Each proxy appends the address it saw, so the chain is read from the right: the
right-most address that is not itself a trusted proxy is the client (a client's own
additions stand to its left, and are ignored).  When every address is trusted, the
left-most is the client.

Exactly one header is read, the one the proxies set: ``X-Forwarded-For`` by default
(what nginx, HAProxy, AWS ALB, Caddy and Traefik append to), or ``Forwarded`` (RFC
7239).  The other is never consulted, not even when the chosen one is missing: the
proxies pass it through from the client unchanged, so falling back to it would let a
client choose its logged address.  Ports are dropped.  The identifiers RFC 7239 allows
in place of an address (``unknown``, or an obfuscated ``_name``) are logged as they
are, since the proxy chose to hide the address; anything else that is not an address
ends the walk at the nearest trusted proxy, and a malformed ``Forwarded`` leaves the
peer.  With nothing trusted (the default) the peer is logged and no header is read.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from operator import itemgetter
from typing import cast

from ._errors import ConfigurationError
from ._headers import HeaderReader
from ._record import Headers, Record

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# The peers seen so far and whether they are trusted, and the clients found in the
# forwarding headers seen so far (parsing addresses costs microseconds, and the same
# peers and clients come back); each cache is emptied when it reaches this size.
_CACHE_SIZE = 4096
_OBFUSCATED = re.compile(r"_[A-Za-z0-9._-]+")
_PORT = re.compile(r"[0-9]{1,5}|_[A-Za-z0-9._-]+")
# One parameter of a Forwarded element: name=token or name="quoted string", then the
# separator that follows it (";" within an element, "," between elements) or the end.
_PARAMETER = re.compile(
    r'[ \t,]*([!#$%&\'*+.^_`|~0-9A-Za-z-]+)=("(?:[^"\\]|\\.)*"|[!#$%&\'*+.^_`|~0-9A-Za-z:\[\]-]*)'
    r"[ \t]*(?:([;,])[ \t,]*|\Z)"
)
_QUOTED_PAIR = re.compile(r"\\(.)")
_client = itemgetter(2)

#: The forwarding headers a log can read, the default first.
PROXY_HEADERS = ("x-forwarded-for", "forwarded")


class TrustedProxies:
    """Replaces a trusted peer by the client it forwarded for; false when none is trusted."""

    __slots__ = ("_chain", "_clients", "_networks", "_peers", "_reader")

    def __init__(self, entries: Iterable[object], *, header: str = PROXY_HEADERS[0]) -> None:
        name = _proxy_header(header)
        self._networks = tuple(map(_network, entries))
        self._peers: dict[str, bool] = {}
        # By header value: the client, or None for the peer.
        self._clients: dict[bytes, str | None] = {}
        self._reader = HeaderReader((name,))
        self._chain = _forwarded_chain if name == "forwarded" else _forwarded_for_chain

    @property
    def request_header_names(self) -> frozenset[bytes]:
        """The forwarding header field it reads."""
        return frozenset(self._reader.names)

    def __bool__(self) -> bool:
        return bool(self._networks)

    def __call__(self, batch: list[Record]) -> None:
        """Give each record of ``batch`` from a trusted peer its forwarded client, in place."""
        peers = self._peers
        for index, peer in enumerate(map(_client, batch)):
            if peer is None:
                continue
            trusted = peers.get(peer)
            if trusted is None:
                trusted = self._learn(peer)
            if trusted:
                record = batch[index]
                client = self.client(peer, record[9])
                if client != peer:
                    # A plain tuple, as the integrations hand over: a third of the cost.
                    batch[index] = cast(Record, (*record[:2], client, *record[3:]))

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

    def client(self, peer: str, headers: Headers) -> str:
        """The client a trusted ``peer`` forwarded for, according to ``headers``."""
        (value,) = self._reader.values(headers)
        if value is None:
            return peer
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
        for element in reversed(self._chain(value) or ()):
            if element is None:
                break  # a proxy that did not say who its peer was
            element = element.strip()
            if not element:
                continue  # an empty list element (RFC 9110 5.6.1)
            node = _node(element)
            if node is None:
                break
            if isinstance(node, str):
                return node
            if not self._contains(node):
                return str(node)
            client = str(node)
        return client

    def _learn(self, peer: str) -> bool:
        if len(self._peers) >= _CACHE_SIZE:
            self._peers.clear()
        trusted = self._peers[peer] = self.trusts(peer)
        return trusted


def _network(entry: object) -> IPNetwork:
    try:
        if not isinstance(entry, str):
            raise TypeError
        # "10.0.0.1/8" means 10.0.0.0/8, as in nginx's set_real_ip_from.
        return ipaddress.ip_network(entry.strip(), strict=False)
    except (TypeError, ValueError):
        raise ConfigurationError(
            f"trusted_proxies entry {entry!r} is not an IP address or network: give "
            "addresses or CIDR ranges as text, e.g. ['127.0.0.1', '10.0.0.0/8', 'fd00::/8']"
        ) from None


def _proxy_header(header: object) -> str:
    if isinstance(header, str) and header.lower() in PROXY_HEADERS:
        return header.lower()
    raise ConfigurationError(
        f"proxy_header {header!r} is not a forwarding header boundlog reads: choose "
        "'x-forwarded-for' (nginx, HAProxy, AWS ALB, Caddy, Traefik) or 'forwarded' "
        "(RFC 7239), whichever your proxies set"
    )


def _forwarded_for_chain(value: bytes) -> list[str | None]:
    """The addresses of an X-Forwarded-For value, as written."""
    return [*value.decode("latin-1").split(",")]


def _forwarded_chain(value: bytes) -> list[str | None] | None:
    """The ``for=`` node of each element of a Forwarded value (None for an element
    without one), or None if the value is malformed."""
    text = value.decode("latin-1")
    chain: list[str | None] = []
    node: str | None = None
    position = 0
    while position < len(text):
        match = _PARAMETER.match(text, position)
        if match is None or match.end() == position:
            return None
        name, raw, separator = match.groups()
        if name.lower() == "for":
            node = _QUOTED_PAIR.sub(r"\1", raw[1:-1]) if raw.startswith('"') else raw
        if separator != ";":
            chain.append(node)
            node = None
        position = match.end()
    return chain or None


def _node(element: str) -> IPAddress | str | None:
    """The address (without port) or the identifier an element names; None if neither."""
    host, port = element, ""
    if element.startswith("["):
        host, bracket, port = element[1:].partition("]")
        if not bracket or (port and not port.startswith(":")):
            return None
        port = port[1:]
        if not host or ":" not in host:
            return None
    elif element.count(":") == 1:
        host, _, port = element.partition(":")
    if port and not _PORT.fullmatch(port):
        return None
    if host.lower() == "unknown":
        return "unknown"
    if _OBFUSCATED.fullmatch(host):
        return host
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None
