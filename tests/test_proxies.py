"""The client behind trusted proxies, and that an untrusted peer cannot spoof its address."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _records import make_record
from boundlog import AccessLog, ConfigurationError, Record
from boundlog._proxies import TrustedProxies

TRUSTED = ["127.0.0.1", "10.0.0.0/8", "fd00::/8"]
PROXIES = TrustedProxies(TRUSTED)
FORWARDED_PROXIES = TrustedProxies(TRUSTED, header="forwarded")


def logged_client(peer: str | None, headers: Any, proxies: TrustedProxies = PROXIES) -> Any:
    """The client the rewrite gives a record from ``peer`` with these request headers."""
    batch = [make_record(client=peer, request_headers=headers)]
    proxies(batch)
    # Rewritten records are plain tuples, as the integrations hand them over.
    return Record._make(batch[0]).client


@pytest.mark.parametrize(
    ("peer", "headers", "client"),
    [
        # X-Forwarded-For: the right-most address that is not a trusted proxy.
        ("127.0.0.1", [(b"X-Forwarded-For", b"203.0.113.5")], "203.0.113.5"),
        ("127.0.0.1", [(b"x-forwarded-for", b"6.6.6.6, 203.0.113.5")], "203.0.113.5"),
        ("127.0.0.1", [(b"x-forwarded-for", b"203.0.113.5, 10.1.2.3")], "203.0.113.5"),
        ("127.0.0.1", [(b"x-forwarded-for", b"203.0.113.5,10.1.2.3,10.0.0.9")], "203.0.113.5"),
        # Repeated fields are one list, in order.
        (
            "127.0.0.1",
            [(b"x-forwarded-for", b"6.6.6.6"), (b"x-forwarded-for", b"203.0.113.5, 10.0.0.1")],
            "203.0.113.5",
        ),
        # Every address trusted: the left-most.
        ("127.0.0.1", [(b"x-forwarded-for", b"10.0.0.2, 10.0.0.1")], "10.0.0.2"),
        # Ports and brackets are dropped; IPv6 is written in its short form.
        ("127.0.0.1", [(b"x-forwarded-for", b"203.0.113.5:4711")], "203.0.113.5"),
        ("127.0.0.1", [(b"x-forwarded-for", b"[2001:DB8:0::1]:443")], "2001:db8::1"),
        ("127.0.0.1", [(b"x-forwarded-for", b"2001:db8::1")], "2001:db8::1"),
        ("127.0.0.1", [(b"x-forwarded-for", b" , 203.0.113.5 , ")], "203.0.113.5"),
        # Something that is not an address: the walk stops at the nearest trusted proxy.
        ("127.0.0.1", [(b"x-forwarded-for", b"not-an-ip")], "127.0.0.1"),
        ("127.0.0.1", [(b"x-forwarded-for", b"203.0.113.5, evil\n, 10.0.0.4")], "10.0.0.4"),
        ("127.0.0.1", [(b"x-forwarded-for", b"")], "127.0.0.1"),
        # No forwarding header: the peer.
        ("127.0.0.1", [(b"host", b"example.test")], "127.0.0.1"),
        # Trusted by range, in both families, and as an IPv4-mapped IPv6 peer.
        ("10.200.0.1", [(b"x-forwarded-for", b"203.0.113.5")], "203.0.113.5"),
        ("fd12::1", [(b"x-forwarded-for", b"203.0.113.5")], "203.0.113.5"),
        ("::ffff:127.0.0.1", [(b"x-forwarded-for", b"203.0.113.5")], "203.0.113.5"),
        # A WSGI environ, and text header pairs.
        ("127.0.0.1", {"HTTP_X_FORWARDED_FOR": "203.0.113.5"}, "203.0.113.5"),
        ("127.0.0.1", [("X-Forwarded-For", "203.0.113.5")], "203.0.113.5"),
    ],
)
def test_a_trusted_peer_is_replaced_by_the_client_it_forwarded_for(
    peer: str, headers: Any, client: str
) -> None:
    """The right-most untrusted address of X-Forwarded-For is logged, as nginx does."""
    assert logged_client(peer, headers) == client


@pytest.mark.parametrize(
    ("headers", "client"),
    [
        # Quoted, bracketed, with ports and other parameters.
        ([(b"Forwarded", b"for=203.0.113.5")], "203.0.113.5"),
        ([(b"forwarded", b'for="[2001:db8:cafe::17]:4711"')], "2001:db8:cafe::17"),
        ([(b"forwarded", b'For="203.0.113.5:80";proto=https;by=10.0.0.1')], "203.0.113.5"),
        ([(b"forwarded", b"for=6.6.6.6, for=203.0.113.5;proto=http")], "203.0.113.5"),
        ([(b"forwarded", b"for=203.0.113.5, for=10.0.0.1")], "203.0.113.5"),
        ([(b"forwarded", b"for=6.6.6.6"), (b"forwarded", b"for=203.0.113.5")], "203.0.113.5"),
        # Identifiers a proxy puts in place of an address are logged as they are.
        ([(b"forwarded", b"for=unknown")], "unknown"),
        ([(b"forwarded", b'for="_hidden:_port", for=10.0.0.3')], "_hidden"),
        ([(b"forwarded", b'for="\\[bad"')], "127.0.0.1"),
        # A proxy that did not say who its peer was ends the walk.
        ([(b"forwarded", b"for=6.6.6.6, proto=https")], "127.0.0.1"),
        # A malformed Forwarded leaves the peer.
        ([(b"forwarded", b"for==")], "127.0.0.1"),
        ([(b"forwarded", b"")], "127.0.0.1"),
        # X-Forwarded-For beside it is not read.
        ([(b"forwarded", b"for=203.0.113.5"), (b"x-forwarded-for", b"6.6.6.6")], "203.0.113.5"),
        ([(b"forwarded", b"for=="), (b"x-forwarded-for", b"198.51.100.1")], "127.0.0.1"),
        ({"HTTP_FORWARDED": "for=203.0.113.5"}, "203.0.113.5"),
    ],
)
def test_with_forwarded_the_client_comes_from_rfc_7239_for_nodes(headers: Any, client: str) -> None:
    """``header="forwarded"`` reads the ``for=`` node of each element, right to left."""
    assert logged_client("127.0.0.1", headers, FORWARDED_PROXIES) == client


@pytest.mark.parametrize(
    ("header", "headers"),
    [
        # The default: a client's own Forwarded, passed through by nginx and the rest.
        ("x-forwarded-for", [(b"forwarded", b"for=1.2.3.4")]),
        ("x-forwarded-for", {"HTTP_FORWARDED": "for=1.2.3.4"}),
        ("X-Forwarded-For", [(b"Forwarded", b"for=1.2.3.4")]),
        # Told to read Forwarded: a client's own X-Forwarded-For.
        ("forwarded", [(b"x-forwarded-for", b"1.2.3.4")]),
        ("forwarded", {"HTTP_X_FORWARDED_FOR": "1.2.3.4"}),
        ("Forwarded", [(b"X-Forwarded-For", b"1.2.3.4")]),
    ],
)
def test_the_other_forwarding_header_alone_leaves_the_peer(header: str, headers: Any) -> None:
    """No fallback: without the header the proxies set, the other one is never read."""
    proxies = TrustedProxies(["127.0.0.1"], header=header)
    assert logged_client("127.0.0.1", headers, proxies) == "127.0.0.1"


@pytest.mark.parametrize(
    "peer", ["203.0.113.9", "11.0.0.1", "127.0.0.2", "fe00::1", "/run/app.sock", "", None]
)
def test_an_untrusted_peer_is_logged_whatever_it_sends(peer: str | None) -> None:
    """A peer outside the trusted list (or not an address at all) keeps its own address."""
    headers = [(b"x-forwarded-for", b"1.2.3.4"), (b"forwarded", b"for=1.2.3.4")]
    assert logged_client(peer, headers) == peer


HEADER_NAMES = st.sampled_from([b"forwarded", b"x-forwarded-for", b"Forwarded", b"X-FORWARDED-FOR"])
HEADER_VALUES = st.one_of(
    st.binary(max_size=80),
    st.lists(
        st.sampled_from(
            [b"1.2.3.4", b"for=1.2.3.4", b"127.0.0.1", b"[::1]:80", b'"', b";", b",", b"unknown"]
        ),
        max_size=6,
    ).map(b", ".join),
)


@settings(max_examples=300, deadline=None)
@given(
    peer=st.sampled_from(["203.0.113.9", "192.168.1.1", "2001:db8::9", "::ffff:8.8.8.8"]),
    headers=st.lists(st.tuples(HEADER_NAMES, HEADER_VALUES), max_size=4),
    proxies=st.sampled_from([PROXIES, FORWARDED_PROXIES]),
)
def test_a_client_controlled_header_never_changes_an_untrusted_peer(
    peer: str, headers: list[tuple[bytes, bytes]], proxies: TrustedProxies
) -> None:
    """No header an untrusted client sends can put another address in the log."""
    assert logged_client(peer, headers, proxies) == peer


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(HEADER_VALUES, max_size=4),
    use_forwarded=st.booleans(),
)
def test_a_trusted_peer_never_takes_the_client_from_the_other_header(
    values: list[bytes], use_forwarded: bool
) -> None:
    """Whatever a client puts in the header the proxies do not set, the peer is logged."""
    other = b"x-forwarded-for" if use_forwarded else b"forwarded"
    proxies = FORWARDED_PROXIES if use_forwarded else PROXIES
    headers = [(other, value) for value in values]
    assert logged_client("10.9.9.9", headers, proxies) == "10.9.9.9"


@settings(max_examples=300, deadline=None)
@given(
    spoofed=st.lists(st.ip_addresses().map(str), max_size=4),
    client=st.ip_addresses().map(str).filter(lambda a: not PROXIES.trusts(a)),
    use_forwarded=st.booleans(),
)
def test_a_client_cannot_spoof_past_a_trusted_proxy(
    spoofed: list[str], client: str, use_forwarded: bool
) -> None:
    """Whatever a client prepends, the address the trusted proxy appended is logged."""
    if use_forwarded:
        elements = [f'for="[{a}]"' if ":" in a else f"for={a}" for a in [*spoofed, client]]
        headers = [(b"forwarded", ", ".join(elements).encode())]
        proxies = FORWARDED_PROXIES
    else:
        headers = [(b"x-forwarded-for", ", ".join([*spoofed, client]).encode())]
        proxies = PROXIES
    assert logged_client("10.9.9.9", headers, proxies) == str(ipaddress.ip_address(client))


def test_nothing_trusted_means_no_rewrite() -> None:
    """By default no peer is trusted: the rewrite is not even part of the log."""
    assert not TrustedProxies([])
    assert logged_client("127.0.0.1", [(b"x-forwarded-for", b"1.2.3.4")], TrustedProxies([])) == (
        "127.0.0.1"
    )


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        (["10.0.0.0/33"], "trusted_proxies entry '10.0.0.0/33' is not an IP address or network"),
        (["localhost"], "trusted_proxies entry 'localhost'"),
        (["127.0.0.1", 5], "trusted_proxies entry 5"),
        (["::1/200"], "trusted_proxies entry '::1/200'"),
    ],
)
def test_a_bad_entry_is_named(entries: list[Any], message: str) -> None:
    """An entry that is not an address or network is a ConfigurationError naming it."""
    with pytest.raises(ConfigurationError, match=message.replace(".", r"\.")):
        AccessLog("stdout", trusted_proxies=entries)


@pytest.mark.parametrize(
    "header", ["x-real-ip", "X-Forwarded", "", "forwarded-for", None, b"forwarded"]
)
def test_an_unknown_proxy_header_names_the_two_choices(header: Any) -> None:
    """Only the two forwarding headers can be read; anything else says which they are."""
    with pytest.raises(ConfigurationError, match=f"proxy_header {re.escape(repr(header))} is not"):
        AccessLog("stdout", trusted_proxies=["10.0.0.1"], proxy_header=header)
    with pytest.raises(ConfigurationError, match=r"choose 'x-forwarded-for' .* or 'forwarded'"):
        TrustedProxies([], header=header)


def test_host_bits_in_a_network_are_accepted() -> None:
    """``10.0.0.1/8`` means ``10.0.0.0/8``, as nginx reads it."""
    proxies = TrustedProxies(["10.0.0.1/8"])
    assert proxies.trusts("10.255.0.1")
    assert not proxies.trusts("11.0.0.1")


@pytest.mark.parametrize(
    ("options", "header", "value"),
    [
        ({}, b"x-forwarded-for", b"6.6.6.6, 203.0.113.5"),
        ({"proxy_header": "X-Forwarded-For"}, b"x-forwarded-for", b"6.6.6.6, 203.0.113.5"),
        ({"proxy_header": "Forwarded"}, b"forwarded", b"for=6.6.6.6, for=203.0.113.5"),
    ],
)
def test_forwarded_clients_reach_the_file(
    tmp_path: Path, options: dict[str, str], header: bytes, value: bytes
) -> None:
    """Through a real log: forwarded clients logged for trusted peers only, nothing filtered."""
    path = tmp_path / "access.log"
    forwarded = [(header, value)]
    with AccessLog(str(path), "common", trusted_proxies="127.0.0.1", **options) as log:
        log.submit(make_record(client="127.0.0.1", request_headers=forwarded))
        log.submit(make_record(client="198.51.100.3", request_headers=forwarded))
    clients = [line.split(b" ")[0] for line in path.read_bytes().splitlines()]
    assert clients == [b"203.0.113.5", b"198.51.100.3"]
    stats = log.stats()
    assert (stats.submitted, stats.written, stats.filtered) == (2, 2, 0)
