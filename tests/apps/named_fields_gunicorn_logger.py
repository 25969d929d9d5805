"""A ``boundlog.gunicorn.Logger`` subclass that writes tests.apps.named_fields' format.

A format object cannot be named on gunicorn's command line; a subclass passes one
through ``log_options``.
"""

from __future__ import annotations

from typing import Any

from boundlog.gunicorn import Logger

from .named_fields import NamedFieldsFormat


class NamedFieldsLogger(Logger):  # type: ignore[misc]
    def log_options(self, cfg: Any) -> dict[str, Any]:
        return {**super().log_options(cfg), "format": NamedFieldsFormat()}
