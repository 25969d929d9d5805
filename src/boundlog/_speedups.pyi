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
