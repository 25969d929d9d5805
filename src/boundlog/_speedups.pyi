# The compiled core (csrc/); imported through boundlog._core only.
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from .engine._admission import Admission
from .record._record import Record

def format_apache(
    records: Sequence[Record],
    clock: Callable[[float], bytes],
    names: tuple[bytes, ...],
    environ_keys: tuple[str, ...],
    /,
) -> bytes | None: ...
def format_json(
    records: Sequence[Record],
    stamp_parts: Callable[[int], tuple[bytes, bytes]],
    texts: tuple[bytes, ...],
    headers: tuple[tuple[bytes, bool, bytes, str, bytes | None], ...],
    taken: frozenset[str],
    trace_header: tuple[bytes, str],
    extras_fields: tuple[tuple[bytes, int | str], ...],
    /,
) -> bytes | None: ...
def format_logfmt(
    records: Sequence[Record],
    stamp_parts: Callable[[int], tuple[bytes, bytes]],
    texts: tuple[bytes, ...],
    headers: tuple[tuple[bytes, bool, bytes, str, bytes | None], ...],
    taken: frozenset[str],
    trace_header: tuple[bytes, str],
    extras_fields: tuple[tuple[bytes, int | str], ...],
    /,
) -> bytes | None: ...
def format_template(
    records: Sequence[Record], ops: tuple[tuple[int, int, object], ...], pid: int, /
) -> bytes | None: ...
def environ_record(
    record_type: type[Record],
    environ: object,
    received: float,
    duration: float,
    status: int,
    sent: int,
    request_headers: object,
    response_headers: object,
    bound: Callable[[bytes, bytes, Any], tuple[bytes, bytes, Any]],
    limit: int,
    notes: dict[str, Any] | None,
    /,
) -> Record | None: ...
def select_records(
    batch: list[Record],
    skip_paths: frozenset[bytes],
    path_prefixes: tuple[bytes, ...],
    skip_path_errors: bool,
    skip_status: frozenset[int],
    min_duration: float,
    /,
) -> list[Record] | None: ...
def joined_queries(batch: list[Record], /) -> bytes | None: ...
def learn_asgi_extras(parts: tuple[Any, ...], scope: Any, completed: bool, /) -> Any: ...
def relp_await(fd: int, expected: bytes, timeout_ms: int, /) -> bytes: ...
def otlp_log_record(line: dict[str, Any], time_ns: int, observed_ns: int, /) -> bytes | None: ...
def pack_record(record: Record, keeps: Iterable[bytes] | None = None, /) -> Packed | None: ...
def unpacked(records: Sequence[Record | Packed], /) -> list[Record]: ...

#: What a header field costs the queue's byte budget beyond its bytes (csrc/record/record.h).
FIELD_OVERHEAD: int

class Packed:
    """A Record packed into one block of bytes while queued (csrc/record/packed.h)."""

    cost: int
    def record(self) -> Record: ...

class Queue:
    """The records waiting for the writer: engine/_queue.Pending in C (csrc/engine/queue.h)."""

    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[Any]: ...
    def append(self, record: Any, /) -> None: ...
    def take(self, count: int, /) -> list[Any]: ...
    def withdraw(self, record: Any, /) -> bool: ...
    def drain(self) -> int: ...

class Handoff:
    """``Handoff(admission)(record)`` is ``admission.offer(record)`` (csrc/paths/handoff.c)."""

    admission: Admission
    def __init__(
        self, admission: Admission, *, packs: bool = False, keeps: Iterable[bytes] | None = None
    ) -> None: ...
    def __call__(self, record: Record, /) -> bool: ...

class AsgiMiddleware:
    """The compiled request path of asgi.AccessLogMiddleware (csrc/paths/asgi_middleware.c)."""

    def bind(self, **request_path: object) -> None: ...

class WsgiMiddleware:
    """The compiled request path of wsgi.AccessLogMiddleware (csrc/paths/wsgi_middleware.c)."""

    def bind(self, **request_path: object) -> None: ...
