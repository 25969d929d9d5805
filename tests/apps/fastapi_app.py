"""The README's FastAPI quick start: ``app.add_middleware(AccessLogMiddleware, ...)``.

Its log options come from the environment (see ``tests.apps.log_options``);
tests/integrations/test_integration_starlette.py runs it under uvicorn with a log that cannot be built.
"""

from __future__ import annotations

from fastapi import FastAPI

from boundlog.asgi import AccessLogMiddleware

from . import log_options

app = FastAPI()
app.add_middleware(AccessLogMiddleware, **log_options())


@app.get("/")
async def hello() -> dict[str, str]:
    return {"hello": "world"}
