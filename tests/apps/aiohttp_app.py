"""The aiohttp server of tests/integrations/test_integration_aiohttp.py: ``python -m tests.apps.aiohttp_app MODE PORT``.

It answers the shared routes (see ``tests.apps``) with aiohttp's own responses; ``/raise``
raises, so aiohttp answers with its 500 page, and ``/file`` sends this file.  MODE chooses how boundlog is wired in:

* ``run_app``: ``web.run_app`` with ``access_logger(app, **options)``, a class owning its
  log, which the application's cleanup closes;
* ``plain``: ``web.run_app`` with :class:`boundlog.aiohttp.AccessLogger` itself, writing to
  stdout in the format named by ``access_log_format``;
* ``runner``: ``web.AppRunner`` with ``access_logger(app, log=...)``, a borrowed log that
  cleanup flushes.  After cleanup the script prints ``written=N``, the lines written by
  then, and leaves the log to the exit handlers.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from aiohttp import web

from boundlog import AccessLog
from boundlog.aiohttp import AccessLogger, access_logger

from . import FORMAT_VARIABLE, log_options, plan_response

LOOPBACK = "127.0.0.1"
# Answers with this file, which aiohttp sends with sendfile().
FILE_PATH = "/file"


async def handle(request: web.Request) -> web.StreamResponse:
    body = await request.read()
    if request.method == "HEAD":
        # aiohttp leaves out the body of a whole HEAD response itself, but writes what a
        # handler streams: the plan for HEAD streams nothing.
        whole = plan_response("GET", request.path, body)
        if not whole.streamed:
            return web.Response(status=whole.status, body=b"".join(whole.chunks) or None)
    plan = plan_response(request.method, request.path, body)
    if not plan.streamed:
        return web.Response(status=plan.status, body=b"".join(plan.chunks) or None)
    response = web.StreamResponse(status=plan.status, headers=dict(plan.headers))
    await response.prepare(request)
    for chunk in plan.chunks:
        await response.write(chunk)
    await response.write_eof()
    return response


async def send_this_file(request: web.Request) -> web.FileResponse:
    return web.FileResponse(__file__)


def make_app() -> web.Application:
    app = web.Application()
    app.router.add_get(FILE_PATH, send_this_file)
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


async def serve_with_runner(port: int) -> None:
    app = make_app()
    log = AccessLog(**log_options())
    runner = web.AppRunner(app, access_log_class=access_logger(app, log=log))
    await runner.setup()
    await web.TCPSite(runner, LOOPBACK, port).start()
    stopping = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopping.set)
    await stopping.wait()
    await runner.cleanup()
    print(f"written={log.stats().written}", flush=True)


def main(mode: str, port: int) -> None:
    if mode == "runner":
        asyncio.run(serve_with_runner(port))
        return
    app = make_app()
    if mode == "run_app":
        web.run_app(
            app, host=LOOPBACK, port=port, print=None,
            access_log_class=access_logger(app, **log_options()),
        )  # fmt: skip
    elif mode == "plain":
        web.run_app(
            app, host=LOOPBACK, port=port, print=None, access_log_class=AccessLogger,
            access_log_format=os.environ[FORMAT_VARIABLE],
        )  # fmt: skip
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
