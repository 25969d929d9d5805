"""Request ids: each HTTP request gets one, and its response says which.

A middleware made with ``request_id=True`` (or a header name) looks for the id in that
request header.  A request without a usable one gets a new id, put in the request's
headers (the ASGI scope's, the WSGI environ's ``HTTP_*`` variable) before the
application runs: the application reads it as the request header it now has, and the
record's headers hold it too, so JSON's ``request_id`` (which reads X-Request-ID) and
any format naming the header show it with no change to the format.  The response
carries the id back in the same header, whether the client sent it or the middleware
made it, unless the application set that header itself.

What the client sends is kept when it is 1 to 200 visible ASCII characters other than
a comma: anything else (a space, control bytes, a header sent twice, which a WSGI
server joins with commas) is replaced, since the id is echoed to the client and copied
into every line that follows the request.  Unlike asgi-correlation-id, any such text
is an id, not only a UUID: proxies and clients send ids of their own shapes.

A new id is 128 random bits from the kernel in 32 hex digits, as ``uuid4().hex``
spells them: ``os.urandom(16).hex()`` costs a fraction of ``uuid4().hex``, which
builds a UUID object around the same bytes, and, unlike ``random``, needs no seeding
after a fork for workers not to repeat each other's ids.
"""

from __future__ import annotations

import os
import re
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

from .._errors import ConfigurationError
from ..record._headers import environ_key, header_name

#: The header the ids are kept in unless the option names another.
DEFAULT_HEADER = "X-Request-ID"

# Visible ASCII but the comma, 1 to 200 characters; fullmatch, so the length is checked
# as well.
_USABLE_BYTES = re.compile(rb"[!-+\--~]{1,200}")
_USABLE_TEXT = re.compile(r"[!-+\--~]{1,200}")
_START = "http.response.start"

Message = MutableMapping[str, Any]
Send = Callable[[Message], Awaitable[None]]
StartResponse = Callable[..., Callable[[bytes], object]]


def request_id_header(option: str, value: object) -> str | None:
    """The header the ``request_id`` option keeps ids in, or None when it keeps none.

    True keeps them in X-Request-ID, a string names the header, False (or None) turns
    the option off.
    """
    if value is None or value is False:
        return None
    if value is True:
        return DEFAULT_HEADER
    if not isinstance(value, str):
        raise ConfigurationError(
            f"{option} must be True, False or a header name, not {value!r}: e.g. "
            f"{option}=True for {DEFAULT_HEADER}, or {option}='X-Correlation-ID'"
        )
    try:
        header_name(value)
    except ConfigurationError as error:
        raise ConfigurationError(f"{option}={value!r}: {error}") from None
    return value


def new_request_id() -> str:
    """A new request id: 32 hex digits of kernel randomness."""
    return os.urandom(16).hex()


class RequestIds:
    """What a middleware does to its requests and responses to give each an id kept
    in the header field ``name``."""

    __slots__ = ("_environ_key", "_key", "_lower", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._lower = name.lower()
        # As ASGI spells header names (lower-case bytes), and as WSGI keeps the field.
        self._key = header_name(name)
        self._environ_key = environ_key(self._key)

    def asgi_scope(self, scope: MutableMapping[str, Any]) -> tuple[MutableMapping[str, Any], bytes]:
        """The scope the application and the record see, and the request's id.

        A scope given a new id is a copy, with a new header list: the server's is left
        as it was (the ASGI spec asks middleware not to change what it was given).
        """
        key = self._key
        headers = scope["headers"]
        found = [value for name, value in headers if name.lower() == key]
        if len(found) == 1 and _USABLE_BYTES.fullmatch(found[0]):
            return scope, found[0]
        request_id = new_request_id().encode("ascii")
        kept = [pair for pair in headers if pair[0].lower() != key] if found else list(headers)
        kept.append((key, request_id))
        return {**scope, "headers": kept}, request_id

    def asgi_send(self, send: Send, request_id: bytes) -> Send:
        """``send`` with the id added to the response's start message."""
        start = self.asgi_start
        return lambda message: send(start(message, request_id))

    def asgi_start(self, message: Message, request_id: bytes) -> Message:
        """``message``, or for a start message without the field, a new one with it (the
        application's is left as it was: it may send it again).  The C request path
        calls this for every message of a request with an id."""
        if message["type"] != _START:
            return message
        headers = list(message.get("headers", ()))
        if _has_field(headers, self._key):
            return message
        return {**message, "headers": [*headers, (self._key, request_id)]}

    def wsgi(self, environ: dict[str, Any], start_response: StartResponse) -> StartResponse:
        """``start_response`` with the id added to the response's headers; the environ
        gets a new id when it has no usable one."""
        request_id = environ.get(self._environ_key)
        if not isinstance(request_id, str) or not _USABLE_TEXT.fullmatch(request_id):
            request_id = new_request_id()
            # The environ is the request's own (PEP 3333): middleware may change it.
            environ[self._environ_key] = request_id
        name = self.name
        lower = self._lower

        def start_response_with_id(
            status: str, headers: list[tuple[str, str]], exc_info: Any = None
        ) -> Callable[[bytes], object]:
            if not _has_field(headers, lower):
                headers = [*headers, (name, request_id)]
            return start_response(status, headers, exc_info)

        return start_response_with_id


def _has_field(headers: Iterable[tuple[Any, Any]], lower: Any) -> bool:
    return any(name.lower() == lower for name, _ in headers)
