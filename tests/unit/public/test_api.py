"""The public surface: what `import boundlog` exports, and the error hierarchy."""

from __future__ import annotations

import types
from collections.abc import Sequence
from pathlib import Path

import pytest

import boundlog
from _records import make_record


def test_exported_names_are_exactly_all() -> None:
    """Every public name in the package namespace is in __all__, and __all__ is sorted."""
    # Integration submodules (asgi, gunicorn, ...) appear once some test imported them.
    public = {
        name
        for name, value in vars(boundlog).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    public.discard("annotations")
    assert public == set(boundlog.__all__) - {"__version__"}
    assert list(boundlog.__all__) == sorted(boundlog.__all__)


def test_the_base_error_cannot_be_raised_by_mistake() -> None:
    """AccessLogError is abstract; its subclasses are also the matching builtin errors."""
    with pytest.raises(TypeError, match="abstract"):
        boundlog.AccessLogError("oops")
    assert issubclass(boundlog.ConfigurationError, ValueError)
    assert issubclass(boundlog.SinkError, OSError)
    for error in (boundlog.ConfigurationError("x"), boundlog.SinkError("y")):
        assert isinstance(error, boundlog.AccessLogError)


def test_record_is_immutable() -> None:
    """A record cannot be changed after the request path hands it over."""
    record = boundlog.Record(0.0, 0.0, None, "GET", b"/", b"", "HTTP/1.1", 200, 0, [], [])
    with pytest.raises(AttributeError):
        record.status = 404  # type: ignore[misc]


def test_the_field_index_constants_name_the_record_fields() -> None:
    """Code reading a record by position reads the field the constant is named after."""
    from boundlog.record import _record

    assert [getattr(_record, field.upper()) for field in boundlog.Record._fields] == list(
        range(len(boundlog.Record._fields))
    )


def test_a_custom_format_is_a_public_protocol() -> None:
    """``boundlog.Format`` is what ``AccessLog(format=...)`` takes besides a name."""

    class Statuses:
        def format_batch(self, records: Sequence[boundlog.Record]) -> bytes:
            return b"".join(b"%d %s\n" % (record.status, record.path) for record in records)

    custom: boundlog.Format = Statuses()
    assert "Format" in boundlog.__all__
    assert custom.format_batch([make_record(status=404, path=b"/x")]) == b"404 /x\n"


def test_the_logging_bridge_is_a_public_sink() -> None:
    """``boundlog.LoggingSink`` is what ``AccessLog(sink=...)`` takes for a stdlib logger."""
    assert "LoggingSink" in boundlog.__all__
    with boundlog.AccessLog(boundlog.LoggingSink("test.api.access")) as log:
        assert log.submit(make_record())
    assert log.stats().written == 1


def test_an_access_log_offers_no_way_to_refuse_uncounted(tmp_path: Path) -> None:
    """Every public way to hand a record over counts a refusal; the integrations' lock-free
    offer, which leaves the counting to submit, is private."""
    with boundlog.AccessLog(str(tmp_path / "access.log")) as log:
        assert not hasattr(log, "offer")
        assert {"submit", "submit_async"} <= set(dir(log))


@pytest.mark.parametrize("field", ["request_headers", "response_headers"])
def test_header_fields_given_as_an_iterator_can_be_read_twice(field: str) -> None:
    """A generator of header pairs is read into a tuple when the record is made: the
    writer reads a record's headers more than once (rewrites, then the format)."""
    pairs = [(b"user-agent", b"probe/1"), (b"x-forwarded-for", b"192.0.2.1")]
    record = make_record(**{field: (pair for pair in pairs)})
    assert list(getattr(record, field)) == pairs
    assert list(getattr(record, field)) == pairs


def test_header_lists_are_kept_as_given() -> None:
    """A list, tuple or environ goes into the record as it is, never copied."""
    for headers in ([(b"a", b"b")], ((b"a", b"b"),), {"HTTP_A": "b"}):
        assert make_record(request_headers=headers).request_headers is headers


def test_a_generator_of_headers_reaches_both_the_rewrite_and_the_format(tmp_path: Path) -> None:
    """The trusted-proxy rewrite reads X-Forwarded-For, then the format reads User-Agent,
    from the same generator given to Record()."""
    pairs = [(b"user-agent", b"probe/1"), (b"x-forwarded-for", b"192.0.2.1")]
    path = tmp_path / "access.log"
    with boundlog.AccessLog(str(path), trusted_proxies=["127.0.0.1"]) as log:
        log.submit(make_record(request_headers=(pair for pair in pairs)))
    line = path.read_bytes()
    assert line.startswith(b"192.0.2.1 "), line
    assert line.endswith(b' "-" "probe/1"\n'), line
