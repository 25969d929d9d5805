"""A ``boundlog.gunicorn.Logger`` subclass that asks for UTC times through ``log_options``.

tests/integrations/test_integration_gunicorn.py runs gunicorn with it, the way a deployment passes
options the environment variables do not cover.
"""

from __future__ import annotations

from typing import Any

from boundlog.gunicorn import Logger


class UtcLogger(Logger):  # type: ignore[misc]
    def log_options(self, cfg: Any) -> dict[str, Any]:
        return {**super().log_options(cfg), "utc": True}
