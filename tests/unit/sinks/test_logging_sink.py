"""LoggingSink: one LogRecord per record, in the shape the target logger's formatters expect.

Each test attaches real handlers (a collecting one, a StreamHandler, uvicorn's
AccessFormatter, python-json-logger's JsonFormatter, structlog's ProcessorFormatter) to a logger of its own and checks what
they get, and what ``stats()`` counts when a filter raises or a handler blocks.
"""

from __future__ import annotations

import base64
import http.client
import io
import json
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from gunicorn.config import Config  # type: ignore[import-untyped]
from pythonjsonlogger.json import JsonFormatter
from uvicorn.logging import AccessFormatter

from boundlog import AccessLog, ConfigurationError, LoggingSink, Record, Template
from boundlog.engine._environment import options_from_environment
from boundlog.gunicorn import Logger as GunicornLogger
from boundlog.sinks._logging import ATTRIBUTES, GUNICORN_DEFAULT

START = 1_700_000_000.25
# Part of the combined line of record(), the message of the "line" shape.
LINE_MESSAGE = '"GET /items/7?page=2 HTTP/1.1" 200 512'


class Collector(logging.Handler):
    """Keeps every LogRecord it is handed."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def logger() -> Iterator[logging.Logger]:
    """A logger of the test's own, at INFO, not propagating, its handlers removed after."""
    chosen = logging.getLogger(f"test.access.{uuid.uuid4().hex}")
    chosen.setLevel(logging.INFO)
    chosen.propagate = False
    yield chosen
    for handler in list(chosen.handlers):
        chosen.removeHandler(handler)
        handler.close()
    chosen.filters.clear()


def collected(logger: logging.Logger) -> Collector:
    handler = Collector()
    logger.addHandler(handler)
    return handler


def record(status: int = 200, path: bytes = b"/items/7", query: bytes = b"page=2") -> Record:
    return Record(
        START, 0.5, "10.0.0.1", "GET", path, query, "HTTP/1.1", status, 512,
        request_headers=[(b"Referer", b"https://example.com/"), (b"user-agent", b"curl/8.5")],
        response_headers=[(b"content-type", b"text/plain")],
        notes={"user": "ada"},
    )  # fmt: skip


def write(sink: LoggingSink, records: list[Record], **options: object) -> AccessLog:
    """Log ``records`` to ``sink`` and close the log."""
    log = AccessLog(sink, flush_interval=3600, **options)  # type: ignore[arg-type]
    for item in records:
        assert log.submit(item)
    log.close()
    return log


def test_each_record_is_one_logrecord_with_the_fields_as_attributes(
    logger: logging.Logger,
) -> None:
    handler = collected(logger)
    log = write(LoggingSink(logger.name), [record(), record(404)], utc=True)
    first, second = handler.records
    assert first.name == logger.name
    assert first.levelno == logging.INFO
    assert first.args == ()
    # The "line" shape: the log's format (combined) makes the message.
    assert first.getMessage() == (
        '10.0.0.1 - - [14/Nov/2023:22:13:20 +0000] "GET /items/7?page=2 HTTP/1.1" 200 512 '
        '"https://example.com/" "curl/8.5"'
    )
    assert '" 404 512 ' in second.getMessage()
    assert {name: getattr(first, name) for name in ATTRIBUTES} == {
        "http_client": "10.0.0.1",
        "http_method": "GET",
        "http_path": "/items/7",
        "http_query": "page=2",
        "http_protocol": "HTTP/1.1",
        "http_status": 200,
        "http_bytes_sent": 512,
        "http_duration": 0.5,
        "http_referer": "https://example.com/",
        "http_user_agent": "curl/8.5",
        "http_fields": {"user": "ada"},
    }
    # When the response ended, not when the writer got to it.
    assert first.created == START + 0.5
    assert first.msecs == 750.0
    stats = log.stats()
    assert (stats.submitted, stats.written, stats.failed) == (2, 2, 0)
    messages = [item.getMessage() for item in handler.records]
    assert stats.bytes_written == sum(len(message.encode()) + 1 for message in messages)


def test_the_log_format_makes_the_message_of_the_line_shape(logger: logging.Logger) -> None:
    handler = collected(logger)
    write(LoggingSink(logger.name), [record()], format="%s %U %{user}n")
    assert [item.getMessage() for item in handler.records] == ["200 /items/7 ada"]


def test_the_uvicorn_shape_is_what_uvicorns_access_formatter_unpacks(
    logger: logging.Logger,
) -> None:
    """uvicorn's own msg and args (its client is host:port; a record knows the host)."""
    handler = collected(logger)
    stream = io.StringIO()
    formatted = logging.StreamHandler(stream)
    formatted.setFormatter(
        AccessFormatter(
            '%(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s', use_colors=False
        )
    )
    logger.addHandler(formatted)
    write(LoggingSink(logger.name, message="uvicorn"), [record(), record(200, b"/a%20b", b"")])
    first, second = handler.records
    assert first.msg == '%s - "%s %s HTTP/%s" %d'
    assert first.args == ("10.0.0.1", "GET", "/items/7?page=2", "1.1", 200)
    assert second.args == ("10.0.0.1", "GET", "/a%20b", "1.1", 200)
    assert stream.getvalue().splitlines() == [
        'INFO:     10.0.0.1 - "GET /items/7?page=2 HTTP/1.1" 200 OK',
        'INFO:     10.0.0.1 - "GET /a%20b HTTP/1.1" 200 OK',
    ]


def test_uvicorn_access_and_gunicorn_access_choose_their_shapes() -> None:
    assert LoggingSink("uvicorn.access").shape == "uvicorn"
    assert LoggingSink("gunicorn.access").shape == "gunicorn"
    assert LoggingSink("myapp.access").shape == "line"


def test_the_gunicorn_shape_is_the_template_with_the_atoms_dict(logger: logging.Logger) -> None:
    handler = collected(logger)
    template = (
        '%(h)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s" %({content-type}o)s %({x-missing}i)s %(D)s'
    )
    write(LoggingSink(logger.name, message="gunicorn"), [record()], format=Template(template))
    (emitted,) = handler.records
    assert emitted.msg == template
    # A dict as the only arg, as gunicorn's glogging.Logger.access logs it.
    assert isinstance(emitted.args, dict)
    assert emitted.args["s"] == "200"
    assert emitted.getMessage() == (
        '10.0.0.1 "GET /items/7?page=2 HTTP/1.1" 200 512 "https://example.com/" "curl/8.5" '
        "text/plain - 500000"
    )


def test_the_gunicorn_shape_uses_gunicorns_default_template_for_another_format(
    logger: logging.Logger,
) -> None:
    handler = collected(logger)
    write(LoggingSink(logger.name, message="gunicorn"), [record()])
    (emitted,) = handler.records
    assert emitted.msg == GUNICORN_DEFAULT
    assert emitted.getMessage().endswith(
        '"GET /items/7?page=2 HTTP/1.1" 200 512 "https://example.com/" "curl/8.5"'
    )


def test_formatters_that_write_attributes_see_the_fields(logger: logging.Logger) -> None:
    """A plain %-style formatter and structlog's ProcessorFormatter (JSON)."""
    plain, as_json = io.StringIO(), io.StringIO()
    first = logging.StreamHandler(plain)
    first.setFormatter(logging.Formatter("%(http_method)s %(http_path)s %(http_status)d"))
    second = logging.StreamHandler(as_json)
    second.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processor=structlog.processors.JSONRenderer(sort_keys=True),
            foreign_pre_chain=[structlog.stdlib.ExtraAdder()],
        )
    )
    logger.addHandler(first)
    logger.addHandler(second)
    write(LoggingSink(logger.name), [record(201)])
    assert plain.getvalue() == "GET /items/7 201\n"
    line = json.loads(as_json.getvalue())
    assert line["http_status"] == 201
    assert line["http_fields"] == {"user": "ada"}
    assert line["event"].startswith("10.0.0.1 - - [")


def test_python_json_logger_writes_the_attributes_as_keys(logger: logging.Logger) -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter("{levelname}{message}", style="{"))
    logger.addHandler(handler)
    write(LoggingSink(logger.name, message="uvicorn"), [record(404)])
    line = json.loads(stream.getvalue())
    assert line["message"] == '10.0.0.1 - "GET /items/7?page=2 HTTP/1.1" 404'
    assert line["levelname"] == "INFO"
    assert {key: line[key] for key in ("http_status", "http_path", "http_user_agent")} == {
        "http_status": 404,
        "http_path": "/items/7",
        "http_user_agent": "curl/8.5",
    }


def test_a_filter_that_raises_fails_its_records_only(logger: logging.Logger) -> None:
    handler = collected(logger)

    def no_errors(item: logging.LogRecord) -> bool:
        if getattr(item, "http_status", 0) >= 500:
            raise RuntimeError("the filter fails")
        return True

    logger.addFilter(no_errors)
    records = [record(200), record(500), record(201), record(503), record(204)]
    log = write(LoggingSink(logger.name), records, report_loss=False)
    assert [item.http_status for item in handler.records] == [200, 201, 204]  # type: ignore[attr-defined]
    stats = log.stats()
    assert (stats.written, stats.failed, stats.write_errors) == (3, 2, 1)
    assert stats.submitted == stats.written + stats.dropped + stats.filtered + stats.failed


def test_a_handler_whose_emit_raises_is_counted(logger: logging.Logger) -> None:
    """Handler.handle lets what emit raises through (the stdlib's handlers catch their own
    errors and report them with handleError; a handler of one's own need not)."""

    class Raising(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            raise OSError("disk gone")

    logger.addHandler(Raising())
    log = write(LoggingSink(logger.name), [record(), record()], report_loss=False)
    assert (log.stats().written, log.stats().failed) == (0, 2)


def test_a_logger_above_the_level_takes_the_records_and_emits_none(
    logger: logging.Logger,
) -> None:
    handler = collected(logger)
    logger.setLevel(logging.WARNING)
    log = write(LoggingSink(logger.name), [record()])
    assert handler.records == []
    assert log.stats().written == 1
    logger.setLevel(logging.INFO)
    write(LoggingSink(logger.name, level="WARNING"), [record()])
    assert [item.levelname for item in handler.records] == ["WARNING"]


def test_a_blocked_handler_holds_up_the_writer_only(logger: logging.Logger) -> None:
    """Requests never wait for it: the queue fills and drops, counted."""
    entered, release = threading.Event(), threading.Event()

    class Blocking(Collector):
        def emit(self, record: logging.LogRecord) -> None:
            entered.set()
            release.wait()
            super().emit(record)

    handler = Blocking()
    logger.addHandler(handler)
    log = AccessLog(LoggingSink(logger.name), max_queue=10, batch_size=1, report_loss=False)
    try:
        assert log.submit(record())
        assert entered.wait(10)
        # The writer is stuck in emit: the queue takes 10 records, refuses the rest.
        accepted = [log.submit(record()) for _ in range(50)]
        assert accepted.count(True) == 10
        assert log.stats().dropped == 40
    finally:
        release.set()
    stats = log.close()
    assert (stats.submitted, stats.written, stats.dropped) == (51, 11, 40)
    assert len(handler.records) == 11


def test_a_handler_that_submits_to_its_own_log_under_wait_never_waits(
    logger: logging.Logger,
) -> None:
    """A submission from the writer thread is refused when there is no room, not waited on.

    The handler, run by the writer, fills the one-record queue and submits once more:
    waiting for room there would wait for the writer itself, and every request behind
    it would wait for ever.  Then a request thread submits under ``wait`` too, and gets
    its record written.
    """
    log: AccessLog
    answers: list[bool] = []

    class Resubmitting(Collector):
        def emit(self, record: logging.LogRecord) -> None:
            super().emit(record)
            if record.http_path == "/request":  # type: ignore[attr-defined]
                answers.append(log.submit(make(b"/from-handler")))
                answers.append(log.submit(make(b"/from-handler")))

    def make(path: bytes) -> Record:
        return Record(START, 0.5, "10.0.0.1", "GET", path, b"", "HTTP/1.1", 200, 512)

    logger.addHandler(handler := Resubmitting())
    log = AccessLog(
        LoggingSink(logger.name), policy="wait", max_queue=1, batch_size=1, report_loss=False
    )
    request = threading.Thread(target=lambda: answers.append(log.submit(make(b"/request"))))
    request.start()
    request.join(30)
    assert not request.is_alive()
    assert log.flush(timeout=30)
    stats = log.close(timeout=30)
    assert answers == [True, True, False]
    assert (stats.submitted, stats.written, stats.dropped) == (3, 2, 1)
    assert [r.http_path for r in handler.records] == ["/request", "/from-handler"]  # type: ignore[attr-defined]


def test_a_real_server_whose_log_handler_submits_to_its_log_under_wait_keeps_answering(
    logger: logging.Logger,
) -> None:
    """The same behind a real WSGI server (wsgiref, one request at a time): the
    handler's submissions that find no room are counted, and every request is answered
    and logged."""
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    from boundlog.wsgi import AccessLogMiddleware

    class Quiet(WSGIRequestHandler):
        def log_request(self, *args: object) -> None:
            pass

    def app(environ: dict[str, object], start_response: Any) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]

    log: AccessLog

    class Resubmitting(Collector):
        def emit(self, record: logging.LogRecord) -> None:
            super().emit(record)
            if record.http_path == "/request":  # type: ignore[attr-defined]
                for _ in range(2):
                    log.submit(Record(START, 0.1, "10.0.0.1", "GET", b"/audit", b"",
                                      "HTTP/1.1", 200, 0))  # fmt: skip

    logger.addHandler(handler := Resubmitting())
    log = AccessLog(
        LoggingSink(logger.name), policy="wait", max_queue=1, batch_size=1, report_loss=False
    )
    server = make_server("127.0.0.1", 0, AccessLogMiddleware(app, log=log), handler_class=Quiet)
    serving = threading.Thread(target=server.serve_forever)
    serving.start()
    requests = 20
    try:
        for _ in range(requests):
            connection = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=30)
            connection.request("GET", "/request")
            assert connection.getresponse().read() == b"ok"
            connection.close()
    finally:
        server.shutdown()
        serving.join()
        server.server_close()
    stats = log.close(timeout=30)
    paths = [r.http_path for r in handler.records]  # type: ignore[attr-defined]
    assert paths.count("/request") == requests
    assert stats.submitted == 3 * requests
    assert stats.written == len(paths)
    assert stats.submitted == stats.written + stats.dropped


def test_logging_name_is_a_sink_spec_and_a_variable(
    logger: logging.Logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    handler = collected(logger)
    write_spec = AccessLog(f"logging:{logger.name}", flush_interval=3600)
    write_spec.submit(record())
    write_spec.close()
    monkeypatch.setenv("BOUNDLOG_SINK", f"logging:{logger.name}")
    options = options_from_environment(dict(__import__("os").environ))
    assert options["sink"] == f"logging:{logger.name}"
    with AccessLog(**options) as from_variable:
        from_variable.submit(record(404))
    assert [item.http_status for item in handler.records] == [200, 404]  # type: ignore[attr-defined]
    assert repr(from_variable) == f"<AccessLog logging:{logger.name} policy=drop closed>"


@pytest.mark.parametrize(
    ("query", "level", "shape", "msg"),
    [
        ("", "INFO", "line", LINE_MESSAGE),
        ("?message=uvicorn", "INFO", "uvicorn", '%s - "%s %s HTTP/%s" %d'),
        ("?message=gunicorn&level=WARNING", "WARNING", "gunicorn", GUNICORN_DEFAULT),
        ("?level=debug&message=line", "DEBUG", "line", LINE_MESSAGE),
        ("?level=30", "WARNING", "line", LINE_MESSAGE),
    ],
)
def test_a_spec_chooses_the_message_and_level_after_the_name(
    logger: logging.Logger, query: str, level: str, shape: str, msg: str
) -> None:
    logger.setLevel(logging.DEBUG)
    handler = collected(logger)
    with AccessLog(f"logging:{logger.name}{query}", flush_interval=3600) as log:
        log.submit(record())
        sink = log._sink
    assert repr(sink) == f"<LoggingSink {logger.name} {level} {shape}>"
    assert [logging.getLevelName(item.levelno) for item in handler.records] == [level]
    assert msg in handler.records[0].msg


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ("logging:a?mesage=uvicorn", "unknown option 'mesage' (did you mean message?): after"),
        ("logging:a?format=json", "unknown option 'format': after the logger name come"),
        ("logging:a?", "unknown option ''"),
        ("logging:a?message=nginx", "unknown message 'nginx': choose one of uvicorn, gunicorn"),
        ("logging:a?message=", "message= has no value, e.g. logging:app.access?message=uvicorn"),
        ("logging:a?level", "level= has no value"),
        ("logging:a?level=LOUD", "level must be a logging level"),
        ("logging:a?message=line&message=uvicorn", "message= is given twice"),
        ("logging:?message=line", "LoggingSink needs a logger name, not ''"),
    ],
)
def test_a_bad_spec_is_refused_naming_it(spec: str, error: str) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(f"sink {spec!r}: {error}")):
        AccessLog(spec)
    # Checked when the variable is read, before any log is built.
    with pytest.raises(ConfigurationError, match=re.escape(f"BOUNDLOG_SINK={spec!r}: {error}")):
        options_from_environment({"BOUNDLOG_SINK": spec})


def test_gunicorns_access_logfile_takes_a_spec(logger: logging.Logger) -> None:
    handler = collected(logger)
    cfg = Config()
    cfg.set("accesslog", f"logging:{logger.name}?message=gunicorn&level=WARNING")
    log = GunicornLogger(cfg).boundlog
    assert log is not None
    log.submit(record())
    log.close()
    assert repr(log._sink) == f"<LoggingSink {logger.name} WARNING gunicorn>"
    assert handler.records[0].msg == GUNICORN_DEFAULT


@pytest.mark.parametrize("spec", ["logging:", "logging:  "])
def test_an_empty_logger_name_is_refused(spec: str) -> None:
    with pytest.raises(ConfigurationError, match="needs a logger name"):
        AccessLog(spec)


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"logger_name": ""}, "needs a logger name"),
        ({"logger_name": "a", "message": "nginx"}, "unknown message 'nginx'"),
        ({"logger_name": "a", "level": "LOUD"}, "level must be a logging level"),
        ({"logger_name": "a", "level": True}, "level must be a logging level"),
    ],
)
def test_bad_arguments_are_refused(arguments: dict[str, object], error: str) -> None:
    with pytest.raises(ConfigurationError, match=error):
        LoggingSink(**arguments)  # type: ignore[arg-type]


def test_a_template_that_is_no_gunicorn_template_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="not a template of gunicorn atoms"):
        LoggingSink("a", message="gunicorn").messages(_BadTemplate())


class _BadTemplate:
    template = "%(h)s %(s"

    def format_batch(self, records: object) -> bytes:
        return b""


def test_timestamps_are_the_records_own(logger: logging.Logger) -> None:
    handler = collected(logger)
    now = time.time()
    write(LoggingSink(logger.name), [record()._replace(time=now, duration=0.0)])
    assert handler.records[0].created == now


def test_the_gunicorn_user_atom_is_the_basic_auth_user(logger: logging.Logger) -> None:
    handler = collected(logger)
    authorized = record()._replace(
        request_headers=[(b"Authorization", b"Basic " + base64.b64encode(b"ada:secret"))]
    )
    write(LoggingSink(logger.name, message="gunicorn"), [authorized, record()])
    assert [item.args["u"] for item in handler.records] == ["ada", "-"]  # type: ignore[call-overload]


def test_a_sink_serves_one_log(logger: logging.Logger) -> None:
    sink = LoggingSink(logger.name)
    with AccessLog(sink), pytest.raises(ConfigurationError, match="already serves a log"):
        AccessLog(sink)


def test_a_forked_child_emits_none_of_the_parents_batch(logger: logging.Logger) -> None:
    """What the format step kept for a batch under way in the parent is not the child's."""
    handler = collected(logger)
    sink = LoggingSink(logger.name)
    step = sink.messages(Template("%s"))
    step.format_batch([record(500)])
    sink.after_fork()
    sink.write(step.format_batch([record(201)]))
    assert [item.getMessage() for item in handler.records] == ["201"]


def test_the_gunicorn_atoms_of_a_wsgi_environ(logger: logging.Logger) -> None:
    """The WSGI middleware's records hold the environ's fields: CONTENT_TYPE is one."""
    handler = collected(logger)
    environ = {"HTTP_USER_AGENT": "curl/8.5", "CONTENT_TYPE": "text/plain", "PATH_INFO": "/"}
    from_wsgi = record()._replace(request_headers=environ)
    template = '"%(a)s" %({content-type}i)s %({path-info}i)s %(p)s'
    write(LoggingSink(logger.name, message="gunicorn"), [from_wsgi], format=Template(template))
    assert handler.records[0].getMessage() == f'"curl/8.5" text/plain - <{os.getpid()}>'


def test_close_gives_up_on_a_blocked_handler_and_counts_the_rest(logger: logging.Logger) -> None:
    entered, release = threading.Event(), threading.Event()

    class Blocking(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            entered.set()
            release.wait()

    logger.addHandler(Blocking())
    log = AccessLog(LoggingSink(logger.name), batch_size=4, report_loss=False)
    try:
        assert log.submit(record())
        assert entered.wait(10)
        for _ in range(5):
            assert log.submit(record())
        stats = log.close(timeout=0)
    finally:
        release.set()
    # The blocked record and the five behind it: none delivered, all counted.
    assert (stats.submitted, stats.written, stats.failed) == (6, 0, 6)


# -- a logger that no handler reaches ---------------------------------------------------


def cut_off_logger() -> logging.Logger:
    """A logger whose parent has no handler and does not propagate: nothing reaches one.

    Made in the test's body: pytest hands its capturing handler to every logger that
    does not propagate when the test begins (not to one cut off later).
    """
    parent = logging.getLogger(f"test.cut.{uuid.uuid4().hex}")
    parent.propagate = False
    chosen = logging.getLogger(f"{parent.name}.access")
    chosen.setLevel(logging.INFO)
    return chosen


def boundlog_lines(capfd: pytest.CaptureFixture[str]) -> list[str]:
    return [line for line in capfd.readouterr().err.splitlines() if line.startswith("boundlog:")]


def test_a_logger_no_handler_reaches_is_named_once_and_its_records_counted_lost(
    capfd: pytest.CaptureFixture[str],
) -> None:
    cut_off = cut_off_logger()
    log = AccessLog(LoggingSink(cut_off.name), flush_interval=3600, report_loss=False)
    # Said on the writer's first batch, not when the log opens: logging may be
    # configured in between.
    assert boundlog_lines(capfd) == []
    for _ in range(3):
        assert log.submit(record())
        log.flush()
    log.close()
    (warning,) = boundlog_lines(capfd)
    assert f"no handler reaches logger {cut_off.name!r}" in warning
    assert f"give {cut_off.name!r} or a logger above it a handler" in warning
    stats = log.stats()
    assert (stats.written, stats.failed) == (0, 3)


def test_a_logger_no_handler_reaches_loses_its_records_whatever_its_level(
    capfd: pytest.CaptureFixture[str],
) -> None:
    # Logging never configured: no level set (the root's WARNING), no handler.
    cut_off = cut_off_logger()
    cut_off.setLevel(logging.NOTSET)
    assert not cut_off.isEnabledFor(logging.INFO)
    log = write(LoggingSink(cut_off.name), [record()], report_loss=False)
    (warning,) = boundlog_lines(capfd)
    assert f"no handler reaches logger {cut_off.name!r}" in warning
    assert (log.stats().written, log.stats().failed) == (0, 1)


def test_a_logger_whose_level_discards_the_lines_is_named_once(
    logger: logging.Logger, capfd: pytest.CaptureFixture[str]
) -> None:
    """logging.basicConfig() leaves the root at WARNING, and a logger with no level of
    its own takes it: every INFO line was discarded without a word."""
    handler = collected(logger)
    logger.setLevel(logging.NOTSET)
    logger.parent = logging.getLogger("test.warning-root")
    logger.parent.setLevel(logging.WARNING)
    log = write(LoggingSink(logger.name), [record(), record()])
    (warning,) = boundlog_lines(capfd)
    assert f"logger {logger.name!r} keeps WARNING and above: it discards the access lines" in (
        warning
    )
    assert f"logging.getLogger({logger.name!r}).setLevel(logging.INFO)" in warning
    assert handler.records == []
    assert log.stats().written == 2
    # At a level it keeps: no word.
    write(LoggingSink(logger.name, level="WARNING"), [record()])
    assert boundlog_lines(capfd) == []
    assert len(handler.records) == 1


def test_a_logger_configured_after_the_log_is_built_is_no_false_alarm(
    capfd: pytest.CaptureFixture[str],
) -> None:
    cut_off = cut_off_logger()
    log = AccessLog(LoggingSink(cut_off.name), flush_interval=3600)
    # As Django's LOGGING or a dictConfig after the imports would, before any request.
    assert cut_off.parent is not None
    handler = collected(cut_off.parent)
    assert log.submit(record())
    log.close()
    assert boundlog_lines(capfd) == []
    assert len(handler.records) == 1
    assert (log.stats().written, log.stats().failed) == (1, 0)


def test_a_disabled_logger_is_named_and_its_records_counted_lost(
    logger: logging.Logger, capfd: pytest.CaptureFixture[str]
) -> None:
    handler = collected(logger)
    logger.disabled = True
    try:
        log = write(LoggingSink(logger.name), [record(), record()], report_loss=False)
    finally:
        logger.disabled = False
    (warning,) = boundlog_lines(capfd)
    assert f"logger {logger.name!r} is disabled" in warning
    assert "disable_existing_loggers" in warning
    assert handler.records == []
    assert (log.stats().written, log.stats().failed) == (0, 2)


def test_warnings_reach_the_handler_of_last_resort(
    capfd: pytest.CaptureFixture[str],
) -> None:
    cut_off = cut_off_logger()
    cut_off.parent.propagate = True  # type: ignore[union-attr]
    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers.clear()  # pytest's own handlers aside, the root has none
    try:
        log = write(LoggingSink(cut_off.name, level="WARNING"), [record()])
    finally:
        root.handlers[:] = saved
    err = capfd.readouterr().err
    assert "boundlog:" not in err
    assert '"GET /items/7?page=2 HTTP/1.1" 200' in err  # logging.lastResort wrote it
    assert log.stats().written == 1


def test_uvicorn_access_cut_off_by_uvicorn_is_said_when_the_log_opens(
    capfd: pytest.CaptureFixture[str],
) -> None:
    # What uvicorn's --no-access-log does to the logger, before it imports the app.
    uvicorn_access = logging.getLogger("uvicorn.access")
    saved = uvicorn_access.handlers[:], uvicorn_access.propagate, uvicorn_access.level
    uvicorn_access.handlers.clear()
    uvicorn_access.propagate = False
    uvicorn_access.setLevel(logging.INFO)
    try:
        log = AccessLog("logging:uvicorn.access", flush_interval=3600, report_loss=False)
        (warning,) = boundlog_lines(capfd)
        assert "no handler reaches logger 'uvicorn.access'" in warning
        assert "--no-access-log" in warning
        assert "logging:app.access?message=uvicorn" in warning
        assert log.submit(record())
        log.close()
        assert boundlog_lines(capfd) == []  # said once
        assert (log.stats().written, log.stats().failed) == (0, 1)
    finally:
        uvicorn_access.handlers[:], uvicorn_access.propagate, uvicorn_access.level = saved
