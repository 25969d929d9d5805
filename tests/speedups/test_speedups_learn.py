"""The extras an ASGI log learns when a response ends, in C (csrc/paths/asgi_learn.c)
against the pure-Python reference (``_extras.python_learner``): the same Extras, or the
same exception, for any scope and any span current in the request's context."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from opentelemetry.trace.propagation import _SPAN_KEY
from starlette.routing import Host, Mount, Route

from _examples import examples
from boundlog import Extras, _core
from boundlog.capture._extras import compiled_learner, learner, python_learner, trace_reader

pytestmark = pytest.mark.skipif(
    _core.speedups is None, reason=f"the C core is not in use ({_core.description})"
)

TRACER = TracerProvider().get_tracer("boundlog-tests")


class Broken(NonRecordingSpan):
    def get_span_context(self) -> SpanContext:
        raise RuntimeError("no context")


class Odd(NonRecordingSpan):
    """A span whose context is not the API's tuple: read by its attributes."""

    def get_span_context(self) -> Any:
        class Context:
            is_valid = 1
            trace_id = 7
            span_id = "eight"

        return Context()


class Subclassed(SpanContext):
    @property
    def trace_id(self) -> int:
        return 99


def _valid(trace_id: int = 0xABC, span_id: int = 0xDEF) -> SpanContext:
    return SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(1))


#: What the request's context holds under the API's span key.
CURRENT = {
    "nothing": None,
    "sdk-span": "sdk",
    "remote-parent": NonRecordingSpan(_valid()),
    "invalid": NonRecordingSpan(trace.INVALID_SPAN_CONTEXT),
    "not-a-span": "a string",
    "raises": Broken(_valid()),
    "odd-context": Odd(_valid()),
    "subclassed-context": NonRecordingSpan(Subclassed(0x1, 0x2, is_remote=False)),
}


@contextlib.contextmanager
def current(name: str) -> Iterator[None]:
    value = CURRENT[name]
    if value == "sdk":
        with TRACER.start_as_current_span("request"):
            yield
        return
    token = otel_context.attach(otel_context.set_value(_SPAN_KEY, value)) if value else None
    try:
        yield
    finally:
        if token is not None:
            otel_context.detach(token)


MOUNTED = Mount("/api", routes=[Route("/items/{item_id}", lambda request: None)])


class RouteOfItsOwn:
    """What another framework might keep under "route": a template that is not a str,
    or one whose reading fails."""

    def __init__(self, template: Any) -> None:
        self._template = template

    @property
    def path_format(self) -> Any:
        if isinstance(self._template, Exception):
            raise self._template
        return self._template


SCOPES = st.sampled_from([
    {},
    {"boundlog.route": "/mine"},
    {"boundlog.route": 5, "path_template": "/tpl"},
    {"boundlog.route": ["a", "list"]},
    {"path_template": "/items/{id}"},
    {"path_template": ""},
    {"path_template": b"/bytes"},
    {"route": None, "path_template": "/after-none"},
    {"route": Route("/users/{user_id:int}", lambda request: None)},
    {"route": MOUNTED.routes[0], "app_root_path": "", "root_path": "/api"},
    {"route": object()},
    {"route": Route("/a/{b}", lambda request: None), "app_root_path": None},
    {"route": Host("example.com", app=MOUNTED)},
    {"route": RouteOfItsOwn("/str")},
    {"route": RouteOfItsOwn(5)},
    {"route": RouteOfItsOwn(ValueError("no template"))},
    {"route": RouteOfItsOwn("/x"), "app_root_path": "/r", "root_path": "/r/m"},
    MappingProxyType({"boundlog.route": "/proxy"}),
])  # fmt: skip


def outcome(learn: Callable[[Any, bool], Any], scope: Any, completed: bool) -> Any:
    try:
        return learn(scope, completed)
    except Exception as error:  # the same exception is the promise
        return type(error), str(error)


@settings(max_examples=examples(300))
@given(
    scope=SCOPES,
    completed=st.booleans(),
    span=st.sampled_from(sorted(CURRENT)),
    reads=st.sets(st.sampled_from(["route", "trace", "completed"]), min_size=1),
)
def test_c_learns_what_the_reference_learns(
    scope: Any, completed: bool, span: str, reads: set[str]
) -> None:
    compiled = compiled_learner("route" in reads, "trace" in reads, "completed" in reads)
    assert compiled is not None
    reference = python_learner(
        "route" in reads, trace_reader() if "trace" in reads else None, "completed" in reads, None
    )
    with current(span):
        learned = outcome(compiled, scope, completed)
        assert learned == outcome(reference, scope, completed)
    if isinstance(learned, Extras):
        # Queued records keep their extras alive: the collector walks only those
        # that hold a container it tracks (a list as the route, here).
        assert gc.is_tracked(learned) == any(gc.is_tracked(field) for field in learned)
        if learned.trace is not None:
            assert not gc.is_tracked(learned.trace)


def test_an_asgi_log_without_server_variables_learns_in_c() -> None:
    assert isinstance(
        learner(frozenset({"route", "trace"})), type(compiled_learner(True, True, False))
    )
    assert (
        learner(frozenset({"environ"}), frozenset({"x"})).__module__ == "boundlog.capture._extras"
    )


def test_another_runtime_context_is_left_to_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """A runtime context that is not the contextvars one (OTEL_PYTHON_CONTEXT) keeps its
    span elsewhere: the learner is the reference's."""
    monkeypatch.setattr(otel_context, "_RUNTIME_CONTEXT", object())
    assert compiled_learner(True, True, True) is None
    assert compiled_learner(True, False, True) is not None
