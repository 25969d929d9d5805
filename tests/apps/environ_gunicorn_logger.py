"""A ``boundlog.gunicorn.Logger`` subclass that writes tests.apps.environ_lines' format,
which gunicorn's command line cannot name."""

from __future__ import annotations

from typing import Any

from boundlog.gunicorn import Logger

from .environ_lines import EnvironLines


class EnvironLinesLogger(Logger):  # type: ignore[misc]
    def log_options(self, cfg: Any) -> dict[str, Any]:
        return {**super().log_options(cfg), "format": EnvironLines()}
