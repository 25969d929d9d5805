"""hypercorn serving an application wrapped in boundlog's ASGI middleware (tests/apps/asgi_app.py).

hypercorn writes no access log unless ``--access-logfile`` is given, so the middleware's
lines are the only ones.  On SIGTERM hypercorn finishes its requests and runs the
lifespan shutdown, where the middleware closes the log it owns.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from _servers import LOOPBACK, PYTHON, build_exchanges, check_drained_on_stop

REQUESTS = 150


def hypercorn_command(port: int) -> list[str]:
    return [
        PYTHON, "-m", "hypercorn", "--bind", f"{LOOPBACK}:{port}", "--workers", "1",
        "--log-level", "warning", "tests.apps.asgi_app:app",
    ]  # fmt: skip


@pytest.mark.parametrize("log_format", ["combined", "json"])
def test_every_request_is_logged_once_with_exact_fields(tmp_path: Path, log_format: str) -> None:
    """N mixed requests leave exactly N correct lines, written at the lifespan shutdown."""
    check_drained_on_stop(tmp_path, hypercorn_command, build_exchanges(REQUESTS), log_format)
