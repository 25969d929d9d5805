"""boundlog's gunicorn logger class, as the benchmark runs it.

gunicorn's boundlog cells run what a gunicorn user deploys to replace
``--access-logfile``: ``--logger-class boundlog.gunicorn.Logger``, with no middleware.
gunicorn already measures every request for its own access log and hands it to the
logger class, so boundlog only builds a record there: a third less work on the request
path than the WSGI middleware, which must wrap ``start_response`` and the body to find
the same numbers (callgrind: 10.2k instructions a request against 18.6k).

The subclass takes the policy and queue bound from the harness's variables, and keeps
the log it opened where the application (loaded in the worker, after the fork) finds
it to serve the counters and write the final stats.
"""

from __future__ import annotations

from typing import Any

from boundlog import AccessLog
from boundlog.gunicorn import Logger

from ._loggers import LoggerConfig

#: The log the logger class opened, inherited by the worker through fork.
opened: AccessLog | None = None


class BenchLogger(Logger):
    """boundlog's gunicorn logger with the harness's policy and queue bound."""

    def log_options(self, cfg: Any) -> dict[str, Any]:
        config = LoggerConfig.from_environ()
        return {**super().log_options(cfg), "policy": config.policy, "max_queue": config.max_queue}

    def setup(self, cfg: Any) -> None:
        global opened
        super().setup(cfg)
        opened = self.boundlog
