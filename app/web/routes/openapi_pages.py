"""The API explorers, /docs (Swagger UI) and /redoc (ReDoc), served from this site: their files come with the
fastapi-offline package (no CDN, so they work offline like every other page) and they start from a script file,
not inline script, so the site's Content-Security-Policy holds for them too (see app/web/middleware/headers.py)."""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import APIRouter, Request
from starlette.staticfiles import StaticFiles

from app.web.templating import render

ASSETS_URL = "/openapi-assets"
ASSETS_DIR = Path(fastapi_offline.__file__).parent / "static"
router = APIRouter()


def assets() -> StaticFiles:
    """Return the mount that serves Swagger UI's and ReDoc's files."""
    return StaticFiles(directory=ASSETS_DIR)


@router.get("/docs", include_in_schema=False)
def swagger_ui(request: Request):
    return render(request, "openapi/swagger.html", assets=ASSETS_URL, openapi_url=request.app.openapi_url)


@router.get("/redoc", include_in_schema=False)
def redoc(request: Request):
    return render(request, "openapi/redoc.html", assets=ASSETS_URL, openapi_url=request.app.openapi_url)
