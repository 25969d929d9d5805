"""Which core runs: the compiled one (``boundlog._speedups``) or pure Python.

Decided once, at import.  The pure-Python modules are the reference: the C core must
give byte-identical output (``tests/speedups/test_speedups.py``), and where it does not handle a
batch (a field of a type it does not read) it hands the batch back to them.
``BOUNDLOG_NO_EXTENSIONS`` set to any non-empty value forces pure Python, as
``AIOHTTP_NO_EXTENSIONS``, ``YARL_NO_EXTENSIONS`` and ``MULTIDICT_NO_EXTENSIONS`` do
(``bool(os.environ.get(...))``: even ``0`` forces it).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._speedups import AsgiMiddleware, WsgiMiddleware
    from ._speedups import Packed as PackedRecord
    from .record._record import Record

#: The environment variable that forces the pure-Python core.
NO_EXTENSIONS_VARIABLE = "BOUNDLOG_NO_EXTENSIONS"


def _load() -> tuple[ModuleType | None, str]:
    forced = os.environ.get(NO_EXTENSIONS_VARIABLE)
    if forced:
        return None, f"pure-Python core: {NO_EXTENSIONS_VARIABLE}={forced}"
    if sys.implementation.name != "cpython":
        return None, f"pure-Python core: {sys.implementation.name}"
    try:
        from . import _speedups
    except ImportError:
        return None, "pure-Python core: extension not built"
    if not all(
        hasattr(_speedups, name)
        for name in ("format_apache", "format_json", "format_logfmt", "format_template")
    ):
        # Not the extension: a directory of that name left behind, or a stale build.
        return None, f"pure-Python core: {_speedups.__name__} is not the extension"
    return _speedups, "C core"


#: The compiled module, or None when the pure-Python core is in use; and which it is,
#: as ``boundlog --version`` says it ("C core", "pure-Python core: <why>").
speedups, description = _load()

#: The C functions the pure-Python modules call when the C core is in use, else None.
format_apache: (
    Callable[
        [Sequence[Record], Callable[[float], bytes], tuple[bytes, ...], tuple[str, ...]],
        bytes | None,
    ]
    | None
) = None
format_json: (
    Callable[
        [
            Sequence[Record],
            Callable[[int], tuple[bytes, bytes]],
            tuple[bytes, ...],
            tuple[tuple[bytes, bool, bytes, str, bytes | None], ...],
            frozenset[str],
            tuple[bytes, str],
            tuple[tuple[bytes, int | str], ...],
        ],
        bytes | None,
    ]
    | None
) = None
#: ``format_logfmt``: LogfmtFormat.format_batch in C, with format_json's arguments
#: (csrc/formats/json.h, csrc/formats/logfmt.h).
format_logfmt: Callable[..., bytes | None] | None = None
#: ``format_template(records, ops, pid)``: Template.format_batch in C (csrc/formats/template.c).
format_template: (
    Callable[[Sequence[Record], tuple[tuple[int, int, object], ...], int], bytes | None] | None
) = None
#: ``handoff(admission, *, packs=False)``: a C callable doing what ``admission.offer`` does
#: (csrc/paths/handoff.c), which ``AccessLog._offer`` is; else None.  With ``packs``, it queues
#: records of the usual shape as ``Packed`` (csrc/record/packed.h), for a log whose writer
#: formats those in C (``packs_for``).
handoff: Callable[..., Callable[[Record], bool]] | None = None
#: The type of a packed record (csrc/record/packed.h), else None.
Packed: type[PackedRecord] | None = None
#: ``unpacked(records)``: the records as a list, each ``Packed`` one as its Record; else None.
unpacked: Callable[[Sequence[Any]], list[Record]] | None = None
#: ``environ_record(Record, environ, ..., bound, limit, notes, extras)``: _environ.environ_record in C
#: for the usual environ, None for the rest (csrc/paths/environ.c); else None.
environ_record: Callable[..., Record | None] | None = None
#: ``select_records(batch, skip_paths, path_prefixes, skip_path_errors, skip_status,
#: min_duration)``: the records _filters.Select's cheap filters keep
#: (csrc/selection/select.c), None for a batch left to Python; else None.
select_records: (
    Callable[
        [list[Record], frozenset[bytes], tuple[bytes, ...], bool, frozenset[int], float],
        list[Record] | None,
    ]
    | None
) = None
#: ``joined_queries(batch)``: the non-empty queries joined with ``&``, as
#: _redaction.QueryRedaction scans them (csrc/selection/select.c), None if left to Python;
#: else None.
joined_queries: Callable[[list[Record]], bytes | None] | None = None
#: ``otlp_log_record(line, time_ns, observed_ns)``: sinks/otlp/_logs.log_record_python in C
#: (csrc/sinks/otlp.c), None for a line left to Python; else None.
otlp_log_record: Callable[[dict[str, Any], int, int], bytes | None] | None = None
#: ``relp_await(fd, expected, timeout_ms)``: a RELP batch's answers read with the GIL
#: released (csrc/sinks/relp.c), for sinks/_relp.RelpSession; else None.
relp_await: Callable[[int, bytes, int], bytes] | None = None
#: ``learn_asgi_extras(parts, scope, completed)``: capture/_extras.python_learner's learn in C
#: (csrc/paths/asgi_learn.c); else None.
learn_asgi_extras: Callable[[tuple[Any, ...], Any, bool], Any] | None = None
#: The base class of the ASGI middleware's compiled request path, else None.
asgi_middleware: type[AsgiMiddleware] | None = None
#: The base class of the WSGI middleware's compiled request path, else None.
wsgi_middleware: type[WsgiMiddleware] | None = None
#: ``GunicornAccess(offer=, submit=, bound=, limit=, learn=, reads_response_headers=,
#: record_type=, status_codes=, wall_clock=)``: gunicorn's logger
#: class's access in C, ``access(resp, req, environ, request_time) -> bool``, False for a
#: request left to Logger.access (csrc/paths/gunicorn_access.c).
gunicorn_access: Callable[..., Callable[[Any, Any, Any, Any], bool]] | None = None


class CompiledFirst:
    """The one dispatch between the cores for a format with a C counterpart.

    ``format_batch`` is the format's C function when the C core is in use and it formats
    the batch, and ``format_batch_python`` (the reference) otherwise: the C code returns
    None for a batch it leaves to Python (a field of a type it does not read), so a format
    never has to know which core runs.  A subclass says how to call its C function in
    ``format_compiled``, which is only called when the C core is in use.
    """

    __slots__ = ()

    def format_compiled(self, records: Sequence[Record]) -> bytes | None:
        """The C core's bytes for ``records``, or None for a batch left to Python."""
        raise NotImplementedError

    def format_batch_python(self, records: Sequence[Record]) -> bytes:
        """``format_batch`` in pure Python: the reference the C core is tested against."""
        raise NotImplementedError

    def format_batch(self, records: Sequence[Record]) -> bytes:
        """Return one ``\\n``-terminated line per record, in order."""
        if speedups is not None:
            data = self.format_compiled(records)
            if data is not None:
                return data
            # The reference reads Records: a batch the C core left to it may hold
            # records the C hand-off packed.
            assert unpacked is not None
            records = unpacked(records)
        return self.format_batch_python(records)


if speedups is not None:
    format_apache = speedups.format_apache
    format_json = speedups.format_json
    format_logfmt = speedups.format_logfmt
    format_template = speedups.format_template
    handoff = speedups.Handoff
    Packed = speedups.Packed
    unpacked = speedups.unpacked
    environ_record = speedups.environ_record
    asgi_middleware = speedups.AsgiMiddleware
    wsgi_middleware = speedups.WsgiMiddleware
    gunicorn_access = speedups.GunicornAccess
    select_records = speedups.select_records
    joined_queries = speedups.joined_queries
    otlp_log_record = speedups.otlp_log_record
    relp_await = speedups.relp_await
    learn_asgi_extras = speedups.learn_asgi_extras
