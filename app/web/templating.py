"""The one Jinja2 environment of the site, and the `render` helper every route uses."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

from fastapi import Request
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup

from app import ROOT
from app.config import Settings
from app.content.markdown import highlight_code, render_markdown

_env = Environment(loader=FileSystemLoader(str(ROOT / "templates")), autoescape=select_autoescape(default=True))
templates = Jinja2Templates(env=_env)
_static_dir: Path = ROOT / "static"


def current_user(request: Request):
    """Return the signed-in user, or None when nobody is (or the accounts middleware is not installed)."""
    return getattr(request.state, "user", None)


def csrf_token(request: Request) -> str:
    """Return the request's CSRF token, or an empty string when the accounts middleware is not installed."""
    return getattr(request.state, "csrf_token", "") or ""


@lru_cache(maxsize=128)
def _digest(path: Path, mtime: float) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:10]


def asset(name: str) -> str:
    """Return the URL of a file under static/ with a content hash, so browsers may cache it forever."""
    if not _env.auto_reload:  # production: static files do not change under a running server
        return _frozen_asset(_static_dir, name)
    path = _static_dir / name
    try:
        return f"/static/{name}?v={_digest(path, path.stat().st_mtime)}"
    except OSError:
        return f"/static/{name}"


@lru_cache(maxsize=128)
def _frozen_asset(static_dir: Path, name: str) -> str:
    path = static_dir / name
    try:
        return f"/static/{name}?v={_digest(path, path.stat().st_mtime)}"
    except OSError:
        return f"/static/{name}"


# Prompts and starter code are the same text on every request: render each once (a lesson page shows several).
@lru_cache(maxsize=512)
def markdown_filter(text: str) -> Markup:
    """Render Markdown (an exercise prompt) to HTML with the lessons' renderer."""
    return Markup(render_markdown(text or ""))


@lru_cache(maxsize=512)
def highlight_filter(code: str, lang: str = "python") -> Markup:
    """Highlight code on the server with Pygments."""
    return Markup(highlight_code(code or "", lang))


def configure(settings: Settings, *, auto_reload: bool | None = None) -> None:
    """Point the environment at the configured folders; production skips the per-request template mtime check."""
    global _static_dir
    _env.loader = FileSystemLoader(str(settings.templates_dir))
    _env.auto_reload = settings.env != "production" if auto_reload is None else auto_reload
    _static_dir = Path(settings.static_dir)


def render(request: Request, name: str, status_code: int = 200, **context):
    """Render a template to an HTML response; `request` is always in the context."""
    return templates.TemplateResponse(request, name, context, status_code=status_code)


_env.globals.update(current_user=current_user, csrf_token=csrf_token, asset=asset)
_env.filters.update(markdown=markdown_filter, highlight=highlight_filter)
