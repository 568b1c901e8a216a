"""The baseline for the lesson-page benchmark: the same bytes, served by a bare FastAPI route.

The body is the real lesson page, rendered once at import, so the ratio between the two servers is exactly what
our per-request work (middleware, session, progress lookups, template rendering) costs.
"""

from __future__ import annotations

import os

from fastapi import FastAPI
from fastapi.responses import HTMLResponse

_BODY = open(os.environ["COURSE_BENCH_PLAIN_BODY"], "rb").read()

app = FastAPI()


@app.get("/plain")
async def plain() -> HTMLResponse:
    """Return the pre-rendered lesson bytes."""
    return HTMLResponse(_BODY)
