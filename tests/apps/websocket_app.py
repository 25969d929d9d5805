"""The websocket application uvicorn serves in tests/unit/capture/test_websockets.py.

With the format ``session-fields`` its log writes each record as a JSON object of the
fields a session's record holds, the close code among them (from the record's extras).
Every HTTP request gets 200 ``ok``; the websocket routes are:

* ``/server-closes/CODE``: accepts, echoes each frame it receives until ``"bye"``, which
  it answers with ``"é"`` (two bytes in UTF-8), then closes with CODE;
* ``/client-closes``: accepts, sends ``b"hello"`` and waits for the client to close;
* ``/refuse``: closes before accepting, which the server answers with 403;
* ``/deny``: the denial response extension: 401 with the body ``denied``;
* ``/raise-before-accept``: raises before answering the handshake (the server answers 500);
* ``/raise-after-accept``: accepts, sends ``"x"``, waits for a frame, then raises.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

from boundlog import Record
from boundlog.asgi import AccessLogMiddleware

from . import FORMAT_VARIABLE, log_options

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

SESSION_FIELDS = "session-fields"
DENIAL_BODY = b"denied"


class SessionFieldsFormat:
    """One JSON object a record: the fields a websocket session's record holds."""

    reads_extras = frozenset({"close_code"})

    def format_batch(self, records: Sequence[Record]) -> bytes:
        return b"".join(
            json.dumps(
                {
                    "method": record.method,
                    "path": record.path.decode(),
                    "query": record.query.decode(),
                    "protocol": record.protocol,
                    "status": record.status,
                    "bytes_sent": record.bytes_sent,
                    "duration": record.duration,
                    "user_agent": dict(record.request_headers).get(b"user-agent", b"").decode(),
                    "close_code": None if record.extras is None else record.extras.close_code,
                }
            ).encode()
            + b"\n"
            for record in records
        )


async def application(scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
    # The lifespan is refused by returning: the middleware answers it, and drains the
    # log at shutdown as it does for an application with a lifespan of its own.
    if scope["type"] == "websocket":
        assert (await receive())["type"] == "websocket.connect"
        await _session(scope["path"], receive, send)
    elif scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


async def _session(path: str, receive: Receive, send: Send) -> None:
    if path.startswith("/server-closes/"):
        await send({"type": "websocket.accept"})
        while (message := await receive())["text"] != "bye":
            await send({"type": "websocket.send", "text": message["text"]})
        await send({"type": "websocket.send", "text": "é"})
        await send({"type": "websocket.close", "code": int(path.rsplit("/", 1)[1])})
    elif path == "/client-closes":
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.send", "bytes": b"hello"})
        while (await receive())["type"] != "websocket.disconnect":
            pass
    elif path == "/refuse":
        await send({"type": "websocket.close"})
    elif path == "/deny":
        await send({"type": "websocket.http.response.start", "status": 401, "headers": []})
        await send({"type": "websocket.http.response.body", "body": DENIAL_BODY})
    elif path == "/raise-before-accept":
        raise RuntimeError("the test application raises before accepting, on purpose")
    elif path == "/raise-after-accept":
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.send", "text": "x"})
        await receive()
        raise RuntimeError("the test application raises after accepting, on purpose")


def _options() -> dict[str, Any]:
    options = log_options()
    if os.environ.get(FORMAT_VARIABLE) == SESSION_FIELDS:
        options["format"] = SessionFieldsFormat()
    return options


app = AccessLogMiddleware(application, **_options())
