"""Network sink URLs: ``tcp://HOST:PORT``, ``syslog+tls://HOST:PORT``, ``syslog+unix:///dev/log``.

Parsed once, at construction, so that a typo stops the program where the log is made
rather than in a report from the writer thread minutes later.  Anything that starts like
a URL (``scheme://``) is parsed as one: a file named ``syslog:/...`` is never what the
user meant.
"""

from __future__ import annotations

import re
from typing import NamedTuple
from urllib.parse import urlsplit

from .._errors import ConfigurationError

# scheme: (framing, transport, default port).  Framing "lines" sends the formatted lines
# as they are (newline-terminated), "syslog" an RFC 5424 message per line, "relp" the
# same messages as RELP commands, each acknowledged.  No default
# port for the plain line protocols: collectors pick their own.
SCHEMES: dict[str, tuple[str, str, int | None]] = {
    "tcp": ("lines", "tcp", None),
    "tls": ("lines", "tls", None),
    "syslog": ("syslog", "tcp", 514),
    "syslog+tls": ("syslog", "tls", 6514),
    "syslog+udp": ("syslog", "udp", 514),
    "syslog+unix": ("syslog", "unix", None),
    "relp": ("relp", "tcp", None),
}

#: The schemes of an OTLP collector's URL (sinks/otlp), here so that a URL of any sink
#: is told from a path by this module alone.
OTLP_SCHEMES = ("otlp+http", "otlp+https")

_LOOKS_LIKE_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")

_FORMS = (
    "tcp://HOST:PORT, tls://HOST:PORT, syslog://HOST[:PORT] (514), "
    "syslog+tls://HOST[:PORT] (6514), syslog+udp://HOST[:PORT] (514), syslog+unix:///PATH, "
    "relp://HOST:PORT"
)


class Address(NamedTuple):
    """Where a network sink sends, as its URL said."""

    url: str
    scheme: str
    #: ``"lines"``, ``"syslog"`` or ``"relp"``.
    framing: str
    #: ``"tcp"``, ``"tls"``, ``"udp"`` or ``"unix"``.
    transport: str
    #: The host (an IPv6 address without its brackets); empty for a unix socket.
    host: str
    port: int
    #: The socket's path for ``syslog+unix``; empty otherwise.
    path: str


def looks_like_url(text: str) -> bool:
    """Whether ``text`` starts with ``scheme://`` and so must be parsed as a URL."""
    return _LOOKS_LIKE_URL.match(text) is not None


def missing_slashes(text: str) -> str | None:
    """The URL ``text`` was likely meant to be when it is a sink scheme followed by
    ``:`` but not by ``//`` (``syslog:127.0.0.1:514``), which would otherwise be taken
    for the name of a file; None for anything else."""
    scheme, colon, rest = text.partition(":")
    if not colon or rest.startswith("//") or scheme.lower() not in (*SCHEMES, *OTLP_SCHEMES):
        return None
    return f"{scheme}://{rest.lstrip('/')}"


def refuse_missing_slashes(text: str) -> None:
    """A ConfigurationError for a sink URL without its ``//`` (see missing_slashes)."""
    meant = missing_slashes(text)
    if meant is not None:
        raise ConfigurationError(
            f"sink {text!r} is a URL without its '//': write {meant!r} "
            f"(or './{text}' for a file of that name)"
        )


def refuse_blanks(url: str, source: str = "sink URL") -> None:
    """A ConfigurationError for a URL with a space or a control character in it (a
    newline pasted from a file): urlsplit drops some, but the sink's name, in every
    report, would keep them, and a line of stderr would break in two."""
    if any(character.isspace() or not character.isprintable() for character in url):
        raise ConfigurationError(
            f"{source} {url!r} holds a space or a control character: remove it"
        )


def parse_url(url: str) -> Address:
    """The :class:`Address` a network sink URL names, or a ConfigurationError saying why not."""
    if not isinstance(url, str) or not looks_like_url(url):
        raise ConfigurationError(f"{url!r} is not a network sink URL: use one of {_FORMS}")
    refuse_blanks(url)
    scheme = url.split("://", 1)[0].lower()
    if scheme not in SCHEMES:
        raise ConfigurationError(
            f"unknown network sink scheme {scheme!r} in {url!r}: use one of {_FORMS}"
        )
    framing, transport, default_port = SCHEMES[scheme]
    try:
        parts = urlsplit(url)
    except ValueError as error:
        raise ConfigurationError(f"malformed network sink URL {url!r}: {error}") from None
    try:
        port = parts.port
    except ValueError:
        # Out of range, or no number: said as a port of 0 is.
        raise ConfigurationError(f"{url!r}: {scheme}:// needs a port from 1 to 65535") from None
    if parts.query or parts.fragment or "?" in url or "#" in url:
        raise ConfigurationError(f"{url!r}: a network sink URL takes no query nor fragment")
    if parts.username is not None or parts.password is not None:
        raise ConfigurationError(f"{url!r}: a network sink URL takes no user name nor password")
    if transport == "unix":
        if parts.netloc or not parts.path.startswith("/"):
            raise ConfigurationError(
                f"{url!r}: a unix socket is named by its absolute path, three slashes "
                "after the scheme: e.g. syslog+unix:///dev/log"
            )
        return Address(url, scheme, framing, transport, "", 0, parts.path)
    host = parts.hostname or ""
    if not host or parts.path not in ("", "/"):
        raise ConfigurationError(
            f"{url!r}: expected {scheme}://HOST:PORT (an IPv6 address in brackets, "
            f"e.g. {scheme}://[::1]:{default_port or 5170})"
        )
    if port is None:
        port = default_port
    if port is None or port == 0:
        raise ConfigurationError(f"{url!r}: {scheme}:// needs a port from 1 to 65535")
    return Address(url, scheme, framing, transport, host, port, "")
