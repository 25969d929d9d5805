"""The client behind trusted proxies, and that an untrusted peer cannot spoof its address."""

from __future__ import annotations

import ipaddress
import re
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _examples import examples
from _records import make_record
from boundlog import AccessLog, ConfigurationError, Record
from boundlog.selection._proxies import MAX_HOPS, TrustedProxies

TRUSTED = ["127.0.0.1", "10.0.0.0/8", "fd00::/8"]
PROXIES = TrustedProxies(TRUSTED)
FORWARDED_PROXIES = TrustedProxies(TRUSTED, header="forwarded")


def logged_client(peer: str | None, headers: Any, proxies: TrustedProxies = PROXIES) -> Any:
    """The client the rewrite gives a record from ``peer`` with these request headers."""
    batch = [make_record(client=peer, request_headers=headers)]
    proxies(batch)
    assert type(batch[0]) is Record
    return batch[0].client


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
        # A malformed element a trusted proxy appended ends the walk at that proxy.
        ([(b"forwarded", b"for==")], "127.0.0.1"),
        ([(b"forwarded", b"x, for=10.0.0.7")], "10.0.0.7"),
        ([(b"forwarded", b'for="10.0.0.8, for=10.0.0.7')], "10.0.0.7"),
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


@settings(max_examples=examples(300), deadline=None)
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


@settings(max_examples=examples(300), deadline=None)
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


@settings(max_examples=examples(300), deadline=None)
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


@pytest.mark.parametrize(
    ("entry", "network", "address"),
    [("10.0.0.1/8", "10.0.0.0/8", "10.0.0.1"), ("fd00::1/8", "fd00::/8", "fd00::1")],
)
def test_host_bits_in_a_network_are_refused_with_both_readings(
    entry: str, network: str, address: str
) -> None:
    """``10.0.0.1/8`` may mean the network or the one address: the error offers both."""
    with pytest.raises(ConfigurationError) as raised:
        AccessLog("stdout", trusted_proxies=[entry])
    assert str(raised.value) == (
        f"trusted_proxies entry {entry!r} has host bits set: write the network "
        f"{network!r} or the single address {address!r}"
    )


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


@pytest.mark.parametrize(
    "value",
    [
        b"x, for=203.0.113.5",
        b"for==, for=203.0.113.5",
        b'for=", for=203.0.113.5',
        b'for="\\", for=203.0.113.5',
        b";;;, for=203.0.113.5;proto=https",
        b'for="[::1, for="203.0.113.5:80"',
        b"for=6.6.6.6;for, for=203.0.113.5, for=10.0.0.1",
    ],
)
def test_a_malformed_element_from_the_client_cannot_erase_its_address(value: bytes) -> None:
    """Only the elements the trusted proxies appended are judged: a client's malformed
    ``Forwarded`` to the left of the first untrusted hop changes nothing."""
    assert logged_client("127.0.0.1", [(b"forwarded", value)], FORWARDED_PROXIES) == "203.0.113.5"


@settings(max_examples=examples(300), deadline=None)
@given(
    sent=st.binary(max_size=200),
    client=st.ip_addresses().map(str).filter(lambda a: not PROXIES.trusts(a)),
    proxies=st.sampled_from([PROXIES, FORWARDED_PROXIES]),
)
def test_whatever_a_client_sends_the_address_its_proxy_appended_is_logged(
    sent: bytes, client: str, proxies: TrustedProxies
) -> None:
    """Any bytes a client sends in the header, followed by what a trusted proxy appends."""
    if proxies is FORWARDED_PROXIES:
        appended = f'for="[{client}]"' if ":" in client else f"for={client}"
        name = b"forwarded"
    else:
        appended, name = client, b"x-forwarded-for"
    headers = [(name, sent + b", " + appended.encode())]
    assert logged_client("10.9.9.9", headers, proxies) == str(ipaddress.ip_address(client))


@pytest.mark.parametrize(
    "proxies", [PROXIES, FORWARDED_PROXIES], ids=["x-forwarded-for", "forwarded"]
)
def test_reading_a_huge_header_touches_only_its_right_end(proxies: TrustedProxies) -> None:
    """A 60 KiB header costs what its right-most element does: no copy of the value,
    no piece per element."""
    prefix = b"for=6.6.6.6" if proxies is FORWARDED_PROXIES else b"6.6.6.6"
    value = b", ".join([prefix] * 6000) + b", " + prefix.replace(b"6.6.6.6", b"203.0.113.5")
    headers = [(b"forwarded" if proxies is FORWARDED_PROXIES else b"x-forwarded-for", value)]
    # One call first: what a first call allocates once (a coverage tracer recording the
    # lines it has not seen yet, a cached pattern) is not what each header costs.
    proxies.client("127.0.0.1", headers)
    tracemalloc.start()
    try:
        client = proxies.client("127.0.0.1", headers)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert client == "203.0.113.5"
    assert peak < len(value) // 8


@pytest.mark.parametrize(
    "proxies", [PROXIES, FORWARDED_PROXIES], ids=["x-forwarded-for", "forwarded"]
)
def test_a_chain_of_trusted_proxies_is_read_no_further_than_max_hops(
    proxies: TrustedProxies,
) -> None:
    """A peer inside the trusted range sending thousands of trusted addresses: the walk
    stops after MAX_HOPS elements, at the last one it read."""
    addresses = [f"10.0.{n // 256}.{n % 256}" for n in range(5000)]
    if proxies is FORWARDED_PROXIES:
        value = ", ".join(f"for={address}" for address in addresses)
    else:
        value = ", ".join(addresses)
    name = b"forwarded" if proxies is FORWARDED_PROXIES else b"x-forwarded-for"
    assert logged_client("10.9.9.9", [(name, value.encode())], proxies) == addresses[-MAX_HOPS]


def test_many_large_unique_values_leave_the_cache_small() -> None:
    """Clients sending a new 64 KiB X-Forwarded-For each: what the log keeps stays small
    (no value that long is kept as a cache key)."""
    proxies = TrustedProxies(TRUSTED)
    tracemalloc.start()
    try:
        for n in range(500):
            value = b"%d, " % n + b"6" * 65536 + b", 203.0.113.5"
            assert proxies.client("127.0.0.1", [(b"x-forwarded-for", value)]) == "203.0.113.5"
            del value
        kept = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert kept < 65536


@pytest.mark.parametrize(
    "peer",
    [
        pytest.param(None, id="uvicorn-hypercorn"),
        pytest.param("", id="gunicorn-granian-aiohttp"),
        pytest.param("localhost", id="waitress"),
    ],
)
def test_a_unix_entry_trusts_a_unix_socket_peer(peer: str | None) -> None:
    """What each server reports for a Unix-socket peer is trusted by ``"unix"`` alone."""
    headers = [(b"x-forwarded-for", b"6.6.6.6, 203.0.113.5")]
    assert logged_client(peer, headers, TrustedProxies(["unix"])) == "203.0.113.5"
    assert logged_client(peer, headers, TrustedProxies([" UNIX ", "10.0.0.0/8"])) == "203.0.113.5"
    assert logged_client(peer, headers, TrustedProxies(["127.0.0.1"])) == peer
    forwarded = [(b"forwarded", b"for=203.0.113.5")]
    assert logged_client(peer, forwarded, TrustedProxies(["unix"], header="forwarded")) == (
        "203.0.113.5"
    )


@pytest.mark.parametrize("peer", ["127.0.0.1", "::1", "203.0.113.9", "/run/app.sock"])
def test_a_unix_entry_trusts_no_address(peer: str) -> None:
    """``"unix"`` trusts no TCP peer, loopback included."""
    proxies = TrustedProxies(["unix"])
    assert proxies
    assert logged_client(peer, [(b"x-forwarded-for", b"203.0.113.5")], proxies) == peer


def test_a_unix_entry_keeps_the_peer_without_a_forwarding_header(tmp_path: Path) -> None:
    """Through a real log: a trusted Unix peer without the header is logged as ``-``."""
    path = tmp_path / "access.log"
    with AccessLog(str(path), "common", trusted_proxies=["unix"]) as log:
        log.submit(make_record(client=None))
        log.submit(make_record(client=None, request_headers=[(b"x-forwarded-for", b"::1")]))
    assert [line.split(b" ")[0] for line in path.read_bytes().splitlines()] == [b"-", b"::1"]
