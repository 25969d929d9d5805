"""Loopback ports for the servers and receivers the tests start.

A port from ``bind(("127.0.0.1", 0))`` is an ephemeral port: the kernel hands the same
range to every outgoing connection (each HTTP client's socket, wrk's hundreds) and to
every other worker's probe, so a port free a moment ago may be taken by the time the
server binds it: the server fails with "address already in use", or two servers that
set SO_REUSEPORT share the port and each logs the other's requests.  These ports come
from below the ephemeral range instead, each pytest-xdist worker its own block, handed
out in turn from a random start, each checked free when it is given.
"""

from __future__ import annotations

import os
import random
import socket
import threading
from pathlib import Path

LOOPBACK = "127.0.0.1"
#: Ports each worker has to itself, and the first block's first port.
BLOCK = 1000
FIRST = 16000


def _ephemeral_start() -> int:
    """The first port the kernel may hand out on its own (Linux says; else IANA's)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 49152


def _block() -> range:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")  # gw0, gw1, ... (master: none)
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    blocks = max(1, (_ephemeral_start() - FIRST) // BLOCK)
    start = FIRST + (index % blocks) * BLOCK
    return range(start, start + BLOCK)


_PORTS = _block()
_lock = threading.Lock()
_next = random.randrange(len(_PORTS))


def _is_free(port: int, kind: int) -> bool:
    with socket.socket(socket.AF_INET, kind) as probe:
        try:
            probe.bind((LOOPBACK, port))
        except OSError:
            return False
        return True


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A loopback port of this worker's block that nobody has bound (of ``kind``:
    SOCK_STREAM or SOCK_DGRAM), not given out before in this block's round."""
    global _next
    with _lock:
        for _ in range(len(_PORTS)):
            port = _PORTS[_next]
            _next = (_next + 1) % len(_PORTS)
            if _is_free(port, kind):
                return port
    raise AssertionError(f"no free loopback port in {_PORTS}")
