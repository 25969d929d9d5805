"""What a websocket session's ASGI messages tell its access record.

A session gets one record, made when the application returns (or raises), because only
then is its duration known and its last frame sent.  The status is what the server
answers the handshake with, which the application's first message decides (the ASGI
specification's rules, and what uvicorn, hypercorn and daphne do):

* ``websocket.accept``: 101 Switching Protocols;
* ``websocket.close`` before accepting: 403, the refusal the specification prescribes;
* ``websocket.http.response.start`` (the denial response extension): its status, and the
  bytes of its ``websocket.http.response.body`` messages are the bytes sent;
* none of these (the application raised or returned before answering): 0 here, which
  the middleware logs as the 500 the server answers.

After the accept, the bytes sent are the payloads of the frames the application handed
over (``bytes`` as they are, ``text`` as the UTF-8 it goes out in), and the close code
is that of whichever side ended the session first, as far as the application saw it:
its own ``websocket.close`` (1000 unless it gives a code), or the client's close,
which reaches it as a ``websocket.disconnect`` from ``receive``.  A refused handshake
has no close code: no websocket was ever open to close.  The bytes received, for a log
that reads them, are the payloads of the client's frames the application received,
counted as the bytes sent are.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

#: The status of an accepted handshake.
SWITCHING_PROTOCOLS = 101
#: The status of a handshake the application closed before accepting.
FORBIDDEN = 403
# The close codes the ASGI specification gives a message without one: an application's
# ``websocket.close`` means a normal closure, a client's close frame without a code is
# reported as "no status received" (RFC 6455 7.4.1).
_NORMAL_CLOSURE = 1000
_NO_STATUS_RECEIVED = 1005


class Session:
    """The status, bytes sent, close code and handshake response of one session, as
    its messages say them; fed every message the application sends, and (for a log that
    reads close codes) every message it receives."""

    __slots__ = ("close_code", "received", "response", "sent", "status")

    def __init__(self) -> None:
        #: The handshake's status, 0 until the application answers it.
        self.status = 0
        self.sent = 0
        self.received = 0
        self.close_code: int | None = None
        #: The message that answered the handshake (its headers are the response's),
        #: empty until one did.
        self.response: MutableMapping[str, Any] = {}

    def sending(self, message: MutableMapping[str, Any]) -> None:
        kind = message["type"]
        if kind == "websocket.send":
            self.sent += _frame_length(message)
        elif kind == "websocket.accept":
            self.status = SWITCHING_PROTOCOLS
            self.response = message
        elif kind == "websocket.close":
            if self.status == 0:
                self.status = FORBIDDEN
            elif self.status == SWITCHING_PROTOCOLS and self.close_code is None:
                self.close_code = message.get("code", _NORMAL_CLOSURE)
        elif kind == "websocket.http.response.start":
            self.status = message["status"]
            self.response = message
        elif kind == "websocket.http.response.body":
            self.sent += len(message.get("body", b""))

    def receiving(self, message: Mapping[str, Any]) -> None:
        kind = message["type"]
        if kind == "websocket.receive":
            self.received += _frame_length(message)
        elif (
            kind == "websocket.disconnect"
            and self.status == SWITCHING_PROTOCOLS
            and self.close_code is None
        ):
            self.close_code = message.get("code", _NO_STATUS_RECEIVED)


def _frame_length(message: Mapping[str, Any]) -> int:
    # A frame's payload: ``bytes`` as they are, ``text`` as the UTF-8 it goes out in.
    data = message.get("bytes")
    return len(data) if data is not None else _utf8_length(message.get("text") or "")


def _utf8_length(text: str) -> int:
    # ASCII text, what most frames carry, is as long in UTF-8 as in characters: no copy.
    # A lone surrogate, which no server can send, counts as the three bytes it would be
    # rather than raising here, where the application would see it from the wrong place.
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
