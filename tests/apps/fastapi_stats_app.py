"""docs/fastapi.md's snippet for ``stats()``: the application makes the
log and hands it to ``add_middleware`` with ``log=``, reads ``log.stats()`` in a route,
and closes the log in its lifespan, after the last request.

The sink is a relative ``access.log``: tests/integrations/test_integration_starlette.py runs uvicorn
in the test's directory.
"""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from boundlog import AccessLog
from boundlog.asgi import AccessLogMiddleware

log = AccessLog("access.log", format="json")


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    yield
    # After the last request.  The middleware only flushes a log it did not make.
    print("access log closed:", log.close(), flush=True)


app = FastAPI(lifespan=lifespan)
app.add_middleware(AccessLogMiddleware, log=log)


@app.get("/")
async def hello() -> dict[str, str]:
    return {"hello": "world"}


@app.get("/stats")
async def stats() -> dict[str, int]:
    return log.stats()._asdict()
