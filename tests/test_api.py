"""The public surface: what `import boundlog` exports, and the error hierarchy."""

from __future__ import annotations

import types

import pytest

import boundlog


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
