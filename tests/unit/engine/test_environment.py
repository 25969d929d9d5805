"""``BOUNDLOG_*`` variables configure every integration (src/boundlog/engine/_environment.py).

A middleware that builds its own log takes the options its code passes and, for the
others, the environment's; a misspelt variable is an error, not a setting silently
not applied.  gunicorn's logger class reads the same variables (tests/unit/public/test_options.py
and tests/integrations/test_integration_gunicorn.py), but not the sink and format, which its
command line names.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from gunicorn.config import Config  # type: ignore[import-untyped]

from _servers import UVICORN_CLEAN_EXITS, read_log_lines, running_server, uvicorn_app_command
from boundlog import ConfigurationError, SinkError
from boundlog.aiohttp import access_logger
from boundlog.asgi import AccessLogMiddleware
from boundlog.engine._environment import options_from_environment
from boundlog.gunicorn import Logger
from boundlog.wsgi import AccessLogMiddleware as WSGIMiddleware


@pytest.fixture(autouse=True)
def _no_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in os.environ if name.startswith("BOUNDLOG_")]:
        if name != "BOUNDLOG_NO_EXTENSIONS":
            monkeypatch.delenv(name)


async def _asgi_app(scope: Any, receive: Any, send: Any) -> None:
    raise AssertionError("never called")


def _wsgi_app(environ: Any, start_response: Any) -> list[bytes]:
    raise AssertionError("never called")


def test_every_variable_becomes_its_option() -> None:
    options = options_from_environment(
        {
            "BOUNDLOG_SINK": " /var/log/app/access.log ",
            "BOUNDLOG_FORMAT": "json",
            "BOUNDLOG_POLICY": "wait",
            "BOUNDLOG_MAX_QUEUE": "100",
            "BOUNDLOG_SKIP_PATHS": "/healthz,/static/*",
            "BOUNDLOG_METRICS": "0",
            "BOUNDLOG_REPORT_LOSS": "off",
            "BOUNDLOG_WEBSOCKETS": "no",
            "BOUNDLOG_NO_EXTENSIONS": "1",
            "BOUNDLOG_CI_CACHE": "/var/cache/boundlog-ci",
            "PATH": "/usr/bin",
        }
    )
    assert options == {
        "sink": "/var/log/app/access.log",
        "format": "json",
        "policy": "wait",
        "max_queue": 100,
        "skip_paths": ["/healthz", "/static/*"],
        "metrics": False,
        "report_loss": False,
        "websockets": False,
    }


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"BOUNDLOG_SNK": "x.log"}, "unknown setting BOUNDLOG_SNK (did you mean BOUNDLOG_SINK?)"),
        ({"BOUNDLOG_SINK": " "}, "BOUNDLOG_SINK is empty: name the sink"),
        ({"BOUNDLOG_FORMAT": "jsn"}, "BOUNDLOG_FORMAT='jsn': unknown format 'jsn'"),
        ({"BOUNDLOG_MAX_QUEUE": "lots"}, "BOUNDLOG_MAX_QUEUE='lots' is not a whole number"),
    ],
)
def test_a_bad_variable_is_an_error_naming_it(variables: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        options_from_environment(variables)


def _each_middleware_refuses(error: type[Exception], *says: str) -> None:
    """The ASGI, WSGI and aiohttp integrations raise ``error``, its message saying each of ``says``."""
    for make in (
        lambda: AccessLogMiddleware(_asgi_app),
        lambda: WSGIMiddleware(_wsgi_app),
        access_logger,
    ):
        with pytest.raises(error) as raised:
            make()
        for words in says:
            assert words in str(raised.value)


# Every way BOUNDLOG_SINK can be wrong, and a word of what its error must say.
_BAD_SINKS = [
    ("", "is empty"),
    (" ", "is empty"),
    ("tcp://", "expected tcp://HOST:PORT"),
    ("tcp://host", "needs a port"),
    ("tcp://:514", "expected tcp://HOST:PORT"),
    ("tcp://host:99999", "tcp:// needs a port from 1 to 65535"),
    ("tcp://host:abc", "tcp:// needs a port from 1 to 65535"),
    ("tcp://host:0", "needs a port"),
    ("tls://host:1/path", "expected tls://HOST:PORT"),
    ("tcp://user:secret@host:1", "no user name"),
    ("tcp://host:1?x=1", "no query"),
    ("udp://host:514", "unknown network sink scheme 'udp'"),
    ("ftp://host:21", "unknown network sink scheme 'ftp'"),
    ("://host:1", "is not a network sink URL"),
    ("syslog://host:0", "needs a port"),
    ("syslog://host:port", "syslog:// needs a port from 1 to 65535"),
    ("syslog+tls://:6514", "expected syslog+tls://HOST:PORT"),
    ("syslog+udp://[::1", "Invalid IPv6 URL"),
    ("syslog+unix://dev/log", "three slashes"),
    ("relp://host", "needs a port"),
    ("relp://host:70000", "relp:// needs a port from 1 to 65535"),
    ("logging:", "needs a logger name"),
    ("logging:app?colour=red", "unknown option 'colour'"),
    # Never a file named so in the working directory.
    ("syslog:127.0.0.1:514", "without its '//': write 'syslog://127.0.0.1:514'"),
    ("syslog+tls:/logs:6514", "write 'syslog+tls://logs:6514'"),
    ("relp:host:2514", "write 'relp://host:2514'"),
    ("otlp+http:collector:4318", "write 'otlp+http://collector:4318'"),
]


@pytest.mark.parametrize(("value", "says"), _BAD_SINKS)
def test_every_bad_sink_variable_is_an_error_naming_it(
    value: str, says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOUNDLOG_SINK", value)
    _each_middleware_refuses(ConfigurationError, "BOUNDLOG_SINK", says)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("{tmp}", "cannot open {tmp}: Is a directory"),
        ("{tmp}/no/such/directory/access.log", "mkdir -p {tmp}/no/such/directory"),
        ("udp:/host:514", "a network sink is scheme://HOST:PORT"),
    ],
)
def test_a_sink_variable_that_cannot_be_opened_is_an_error_naming_it(
    value: str, says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    value, says = value.format(tmp=tmp_path), says.format(tmp=tmp_path)
    monkeypatch.setenv("BOUNDLOG_SINK", value)
    _each_middleware_refuses(SinkError, f"BOUNDLOG_SINK={value!r}: ", says)
    # A sink the code names is the code's: its error names no variable.
    with pytest.raises(SinkError) as raised:
        AccessLogMiddleware(_asgi_app, sink=value)
    assert "BOUNDLOG_SINK" not in str(raised.value)


def test_the_middlewares_read_the_environment_and_their_code_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOUNDLOG_SINK", str(tmp_path / "access.log"))
    monkeypatch.setenv("BOUNDLOG_POLICY", "wait")
    for middleware in (AccessLogMiddleware(_asgi_app), WSGIMiddleware(_wsgi_app)):
        assert middleware.log.policy == "wait"
        assert repr(middleware.log).startswith(f"<AccessLog {tmp_path / 'access.log'} ")
        middleware.log.close()
    explicit = AccessLogMiddleware(_asgi_app, sink=str(tmp_path / "other.log"), policy="drop")
    assert explicit.log.policy == "drop"
    assert repr(explicit.log).startswith(f"<AccessLog {tmp_path / 'other.log'} ")
    explicit.log.close()
    bound = access_logger(policy="drop").access_log
    assert bound is not None
    assert repr(bound).startswith(f"<AccessLog {tmp_path / 'access.log'} policy=drop ")
    bound.close()


def test_a_misspelt_variable_stops_the_middleware(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOUNDLOG_POLCY", "wait")
    with pytest.raises(ConfigurationError, match="did you mean BOUNDLOG_POLICY"):
        AccessLogMiddleware(_asgi_app)
    with pytest.raises(ConfigurationError, match="did you mean BOUNDLOG_POLICY"):
        WSGIMiddleware(_wsgi_app)


def test_gunicorn_refuses_the_sink_and_format_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOUNDLOG_SINK", "/var/log/app/access.log")
    cfg = Config()
    # Checked when the logger is set up, with or without --access-logfile; gunicorn
    # prints a RuntimeError from its startup as one line and exits.
    with pytest.raises(RuntimeError, match="boundlog: BOUNDLOG_SINK is not read under gunicorn"):
        Logger(cfg)


def test_uvicorn_serves_an_app_configured_by_its_environment(tmp_path: Path) -> None:
    log_path = tmp_path / "access.log"
    environment = {"BOUNDLOG_SINK": str(log_path), "BOUNDLOG_FORMAT": "json"}
    with running_server(
        lambda port: uvicorn_app_command(port, "tests.apps.environment_app:app"),
        environment,
        tmp_path / "out",
    ) as server:
        for number in range(3):
            response = httpx.get(f"http://127.0.0.1:{server.port}/hello/{number}")
            assert response.text == "hello"
        assert server.stop() in UVICORN_CLEAN_EXITS, server.output()
    lines = [json.loads(line) for line in read_log_lines(log_path)]
    assert [line["path"] for line in lines] == [f"/hello/{number}" for number in range(3)]
