"""A ``boundlog.gunicorn.Logger`` subclass that writes tests.apps.route_lines' format,
which gunicorn's command line cannot name."""

from __future__ import annotations

from typing import Any

from boundlog.gunicorn import Logger

from .route_lines import RouteLines


class RouteLinesLogger(Logger):  # type: ignore[misc]
    def log_options(self, cfg: Any) -> dict[str, Any]:
        return {**super().log_options(cfg), "format": RouteLines()}
