"""End to end: a proxy on a Unix socket, and uvicorn's own reading of X-Forwarded-For.

nginx in front of gunicorn or uvicorn on the same host often speaks to it over a Unix
socket.  The servers report such a peer without an address, so the only way to trust it
is the ``"unix"`` entry of ``trusted_proxies``.  Each test runs a real server on a real
socket and sends requests over it as the proxy would, with the X-Forwarded-For the proxy
appends to.

uvicorn reads X-Forwarded-For itself before boundlog sees the request (``--proxy-headers``
is on by default and trusts 127.0.0.1): the last tests show what that does to the log and
which settings leave the decision to boundlog.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from _servers import (
    CLIENT_TIMEOUT,
    LOOPBACK,
    OPTIONS_VARIABLE,
    PYTHON,
    UVICORN_CLEAN_EXITS,
    read_log_lines,
    running_server,
    server_environment,
    stop_gracefully,
)

# What a client sent itself, then the address the proxy saw and appended.
FORWARDED_FOR = "6.6.6.6, 203.0.113.5"
CLIENT = b"203.0.113.5"
# In each test's directory.  A Unix socket's path is limited to about 100 bytes.
SOCKET_NAME = "s"
LOG_NAME = "access.log"


def gunicorn_logger_class(directory: Path) -> Callable[[int], list[str]]:
    def command(port: int) -> list[str]:
        return [
            PYTHON, "-m", "gunicorn", "--logger-class", "boundlog.gunicorn.Logger",
            "--access-logfile", str(directory / LOG_NAME),
            "-b", f"unix:{directory / SOCKET_NAME}", "-w", "1", "--log-level", "warning",
            "tests.apps.bare_wsgi:app",
        ]  # fmt: skip

    return command


def gunicorn_middleware(directory: Path) -> Callable[[int], list[str]]:
    def command(port: int) -> list[str]:
        return [
            PYTHON, "-m", "gunicorn", "-k", "gthread", "--threads", "2", "-w", "1",
            "-b", f"unix:{directory / SOCKET_NAME}", "--log-level", "warning", "tests.apps.wsgi_app:app",
        ]  # fmt: skip

    return command


def uvicorn_uds(directory: Path) -> Callable[[int], list[str]]:
    def command(port: int) -> list[str]:
        return [
            PYTHON, "-m", "uvicorn", "tests.apps.asgi_app:app",
            "--uds", str(directory / SOCKET_NAME),
            "--no-access-log", "--lifespan", "on", "--log-level", "warning",
        ]  # fmt: skip

    return command


def uvicorn_tcp(*options: str) -> Callable[[int], list[str]]:
    def command(port: int) -> list[str]:
        return [
            PYTHON, "-m", "uvicorn", "tests.apps.asgi_app:app", "--host", LOOPBACK,
            "--port", str(port), "--no-access-log", "--lifespan", "on",
            "--log-level", "warning", *options,
        ]  # fmt: skip

    return command


def logged_clients(log_path: Path) -> list[bytes]:
    return [line.split(b" ")[0] for line in read_log_lines(log_path)]


def serve_over_unix_socket(
    tmp_path: Path,
    command: Callable[[Path], Callable[[int], list[str]]],
    environment: dict[str, str],
    clean_exits: tuple[int, ...] = (0,),
) -> list[bytes]:
    """Send one request with and one without X-Forwarded-For over the server's socket;
    the clients logged."""
    log_path = tmp_path / LOG_NAME
    socket_path = tmp_path / SOCKET_NAME
    environment = {**server_environment(log_path, "combined", "0.01"), **environment}
    with running_server(
        command(tmp_path), environment, tmp_path / "server.out", unix_socket=socket_path
    ) as server:
        transport = httpx.HTTPTransport(uds=str(socket_path))
        with httpx.Client(transport=transport, timeout=CLIENT_TIMEOUT) as client:
            forwarded = client.get(
                "http://proxy/bytes/1", headers={"x-forwarded-for": FORWARDED_FOR}
            )
            direct = client.get("http://proxy/bytes/2")
        assert (forwarded.status_code, direct.status_code) == (200, 200)
        stop_gracefully(server, clean_exits)
    return logged_clients(log_path)


@pytest.mark.parametrize(
    ("command", "environment", "clean_exits"),
    [
        pytest.param(
            gunicorn_logger_class, {"BOUNDLOG_TRUSTED_PROXIES": "unix"}, (0,), id="gunicorn-logger"
        ),
        pytest.param(
            gunicorn_middleware,
            {OPTIONS_VARIABLE: json.dumps({"trusted_proxies": ["unix"]})},
            (0,),
            id="gunicorn-wsgi",
        ),
        pytest.param(
            uvicorn_uds,
            {OPTIONS_VARIABLE: json.dumps({"trusted_proxies": ["unix"]})},
            UVICORN_CLEAN_EXITS,
            id="uvicorn-asgi",
        ),
    ],
)
def test_a_trusted_unix_socket_proxy_gives_the_client_it_forwarded_for(
    tmp_path: Path,
    command: Callable[[Path], Callable[[int], list[str]]],
    environment: dict[str, str],
    clean_exits: tuple[int, ...],
) -> None:
    """With ``"unix"`` trusted, a request over the socket logs the right-most forwarded
    address; one without the header logs the peer as the server reports it, ``-``."""
    assert serve_over_unix_socket(tmp_path, command, environment, clean_exits) == [CLIENT, b"-"]


@pytest.mark.parametrize(
    ("command", "environment", "clean_exits"),
    [
        pytest.param(
            gunicorn_logger_class,
            {"BOUNDLOG_TRUSTED_PROXIES": "127.0.0.1"},
            (0,),
            id="gunicorn-logger",
        ),
        pytest.param(uvicorn_uds, {}, UVICORN_CLEAN_EXITS, id="uvicorn-asgi"),
    ],
)
def test_an_untrusted_unix_socket_peer_is_not_replaced(
    tmp_path: Path,
    command: Callable[[Path], Callable[[int], list[str]]],
    environment: dict[str, str],
    clean_exits: tuple[int, ...],
) -> None:
    """Without ``"unix"`` (only 127.0.0.1 trusted), the socket's peer is logged, as ``-``."""
    assert serve_over_unix_socket(tmp_path, command, environment, clean_exits) == [b"-", b"-"]


@pytest.mark.parametrize(
    ("options", "logged"),
    [
        # uvicorn's defaults: --proxy-headers, trusting 127.0.0.1, replace the client
        # before boundlog sees the request, though boundlog trusts nothing.
        pytest.param((), b"6.6.6.6", id="uvicorn-defaults"),
        pytest.param(("--no-proxy-headers",), LOOPBACK.encode(), id="no-proxy-headers"),
        pytest.param(("--forwarded-allow-ips", ""), LOOPBACK.encode(), id="allow-no-ips"),
    ],
)
def test_uvicorn_proxy_headers_decide_the_client_unless_turned_off(
    tmp_path: Path, options: tuple[str, ...], logged: bytes
) -> None:
    """A client on 127.0.0.1 spoofing X-Forwarded-For, boundlog trusting nothing: only
    with uvicorn's proxy headers off does the log show the real peer."""
    log_path = tmp_path / LOG_NAME
    environment = {
        **server_environment(log_path, "combined", "0.01"),
        OPTIONS_VARIABLE: json.dumps({"trusted_proxies": []}),
    }
    with running_server(uvicorn_tcp(*options), environment, tmp_path / "uvicorn.out") as server:
        with httpx.Client(base_url=server.base_url, timeout=CLIENT_TIMEOUT) as client:
            response = client.get("/bytes/1", headers={"x-forwarded-for": "6.6.6.6"})
        assert response.status_code == 200
        stop_gracefully(server, UVICORN_CLEAN_EXITS)
    assert logged_clients(log_path) == [logged]
