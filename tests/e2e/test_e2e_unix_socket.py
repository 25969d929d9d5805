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
import signal
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

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


class UnixServer(NamedTuple):
    """A server on a Unix socket: its command for a test directory, how it stops, and
    what it reports as the peer (logged when nothing replaces it)."""

    command: Callable[[Path], list[str]]
    peer: bytes = b"-"
    stop_signal: signal.Signals = signal.SIGTERM
    clean_exits: tuple[int, ...] = (0,)


def gunicorn_logger(directory: Path) -> list[str]:
    return [
        PYTHON, "-m", "gunicorn", "--logger-class", "boundlog.gunicorn.Logger",
        "--access-logfile", str(directory / LOG_NAME), "-b", f"unix:{directory / SOCKET_NAME}",
        "-w", "1", "--log-level", "warning", "tests.apps.bare_wsgi:app",
    ]  # fmt: skip


def gunicorn_wsgi(directory: Path) -> list[str]:
    return [
        PYTHON, "-m", "gunicorn", "-k", "gthread", "--threads", "2", "-w", "1",
        "-b", f"unix:{directory / SOCKET_NAME}", "--log-level", "warning",
        "tests.apps.wsgi_app:app",
    ]  # fmt: skip


def uvicorn(directory: Path) -> list[str]:
    return [
        PYTHON, "-m", "uvicorn", "tests.apps.asgi_app:app", "--uds", str(directory / SOCKET_NAME),
        "--no-access-log", "--lifespan", "on", "--log-level", "warning",
    ]  # fmt: skip


def hypercorn(directory: Path) -> list[str]:
    return [
        PYTHON, "-m", "hypercorn", "--bind", f"unix:{directory / SOCKET_NAME}", "--workers", "1",
        "--log-level", "warning", "tests.apps.asgi_app:app",
    ]  # fmt: skip


def granian(directory: Path) -> list[str]:
    return [
        PYTHON, "-m", "granian", "--interface", "asgi", "--uds", str(directory / SOCKET_NAME),
        "--workers", "1", "--no-access-log", "--log-level", "warning", "tests.apps.asgi_app:app",
    ]  # fmt: skip


def waitress(directory: Path) -> list[str]:
    return [
        PYTHON, "-m", "waitress", f"--unix-socket={directory / SOCKET_NAME}",
        "--no-clear-untrusted-proxy-headers", "tests.apps.wsgi_app:app",
    ]  # fmt: skip


GUNICORN_LOGGER = UnixServer(gunicorn_logger)
GUNICORN_WSGI = UnixServer(gunicorn_wsgi)
UVICORN = UnixServer(uvicorn, clean_exits=UVICORN_CLEAN_EXITS)
HYPERCORN = UnixServer(hypercorn)
GRANIAN = UnixServer(granian)
# waitress reports a Unix-socket peer as "localhost", and stops gracefully on SIGINT.
WAITRESS = UnixServer(waitress, peer=b"localhost", stop_signal=signal.SIGINT)
TRUST_UNIX = {OPTIONS_VARIABLE: json.dumps({"trusted_proxies": ["unix"]})}


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
    server: UnixServer,
    environment: dict[str, str],
    forwarding_headers: dict[str, str],
) -> list[bytes]:
    """Send one request with and one without ``forwarding_headers`` over the server's
    socket; the clients logged."""
    log_path = tmp_path / LOG_NAME
    socket_path = tmp_path / SOCKET_NAME
    environment = {**server_environment(log_path, "combined", "0.01"), **environment}
    with running_server(
        lambda port: server.command(tmp_path),
        environment,
        tmp_path / "server.out",
        unix_socket=socket_path,
    ) as running:
        transport = httpx.HTTPTransport(uds=str(socket_path))
        with httpx.Client(transport=transport, timeout=CLIENT_TIMEOUT) as client:
            forwarded = client.get("http://proxy/bytes/1", headers=forwarding_headers)
            direct = client.get("http://proxy/bytes/2")
        assert (forwarded.status_code, direct.status_code) == (200, 200)
        status = running.stop(stop_signal=server.stop_signal)
        assert status in server.clean_exits, running.output()
        assert "boundlog:" not in running.output(), running.output()
    return logged_clients(log_path)


@pytest.mark.parametrize(
    ("server", "environment"),
    [
        pytest.param(GUNICORN_LOGGER, {"BOUNDLOG_TRUSTED_PROXIES": "unix"}, id="gunicorn-logger"),
        pytest.param(GUNICORN_WSGI, TRUST_UNIX, id="gunicorn-wsgi"),
        pytest.param(UVICORN, TRUST_UNIX, id="uvicorn"),
        pytest.param(HYPERCORN, TRUST_UNIX, id="hypercorn"),
        pytest.param(GRANIAN, TRUST_UNIX, id="granian", marks=pytest.mark.needs("granian")),
        pytest.param(WAITRESS, TRUST_UNIX, id="waitress"),
    ],
)
def test_a_trusted_unix_socket_proxy_gives_the_client_it_forwarded_for(
    tmp_path: Path, server: UnixServer, environment: dict[str, str]
) -> None:
    """With ``"unix"`` trusted, a request over the socket logs the right-most forwarded
    address; one without the header logs the peer as the server reports it."""
    headers = {"x-forwarded-for": FORWARDED_FOR}
    assert serve_over_unix_socket(tmp_path, server, environment, headers) == [CLIENT, server.peer]


@pytest.mark.parametrize(
    ("server", "environment"),
    [
        pytest.param(
            GUNICORN_LOGGER, {"BOUNDLOG_TRUSTED_PROXIES": "127.0.0.1"}, id="gunicorn-logger"
        ),
        pytest.param(UVICORN, {}, id="uvicorn"),
        pytest.param(WAITRESS, {}, id="waitress"),
    ],
)
def test_an_untrusted_unix_socket_peer_is_not_replaced(
    tmp_path: Path, server: UnixServer, environment: dict[str, str]
) -> None:
    """Without ``"unix"`` (only 127.0.0.1 trusted), the socket's peer is logged."""
    headers = {"x-forwarded-for": FORWARDED_FOR}
    assert serve_over_unix_socket(tmp_path, server, environment, headers) == [server.peer] * 2


def test_a_malformed_forwarded_from_the_client_leaves_the_address_its_proxy_appended(
    tmp_path: Path,
) -> None:
    """``proxy_header="forwarded"`` behind a Unix-socket proxy: the client's own
    malformed element, left of the one the proxy appended, changes nothing."""
    options = {"trusted_proxies": ["unix"], "proxy_header": "forwarded"}
    headers = {"forwarded": 'x, for="[::1, for="203.0.113.5:4711";proto=https'}
    environment = {OPTIONS_VARIABLE: json.dumps(options)}
    assert serve_over_unix_socket(tmp_path, UVICORN, environment, headers) == [CLIENT, b"-"]


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
