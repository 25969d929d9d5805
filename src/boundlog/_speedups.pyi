# The compiled core (csrc/*.c); imported through boundlog._core only.
from collections.abc import Callable, Sequence

from ._record import Record

def format_apache(
    records: Sequence[Record],
    clock: Callable[[float], bytes],
    names: tuple[bytes, ...],
    environ_keys: tuple[str, ...],
    /,
) -> bytes | None: ...

class AsgiMiddleware:
    """The compiled request path of asgi.AccessLogMiddleware (csrc/asgi_middleware.c)."""

    def bind(self, **request_path: object) -> None: ...
