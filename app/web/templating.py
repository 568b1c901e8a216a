"""The Jinja2 environment of one app, and the `render` helper every route uses.

`make_templates(settings)` builds the environment once, in `create_app`, which keeps it on
`app.state.templates`. Every global and filter a template may call is registered here and nowhere else, and
none of them touches the database: routes compute what a page shows and pass it in the context.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache, partial
from pathlib import Path

from fastapi import Request
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup, escape

from app.content import machine_choices
from app.content.markdown import highlight_code, render_inline_markdown, render_markdown
from app.core.config import Settings
from app.grading.placement_map import EVENT_WORDS
from app.learning.attempts import REASONS as UNCOUNTED_REASONS
from app.web.output_view import output_items


def current_user(request: Request):
    """Return the signed-in user, or None when nobody is (or the accounts middleware is not installed)."""
    return getattr(request.state, "user", None)


def csrf_token(request: Request) -> str:
    """Return the request's CSRF token, or an empty string when the accounts middleware is not installed."""
    return getattr(request.state, "csrf_token", "") or ""


def csp_nonce(request: Request) -> str:
    """Return this response's Content-Security-Policy nonce (app.web.middleware.headers), or "" without that
    middleware."""
    return getattr(request.state, "csp_nonce", "") or ""


@lru_cache(maxsize=128)
def _digest(path: Path, mtime: float) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:10]


def _hashed_url(static_dir: Path, name: str) -> str:
    path = static_dir / name
    try:
        return f"/static/{name}?v={_digest(path, path.stat().st_mtime)}"
    except OSError:
        return f"/static/{name}"


class AssetUrls:
    """`asset(name)` in templates: the URL of a file under static/ with a content hash, cacheable forever.

    Frozen (production): each name is hashed once, since static files do not change under a running server.
    Otherwise the file's mtime is checked on every call, so an edited stylesheet shows at the next reload.
    """

    def __init__(self, static_dir: Path, *, frozen: bool) -> None:
        self.static_dir = Path(static_dir)
        self._url = lru_cache(maxsize=128)(partial(_hashed_url, self.static_dir)) if frozen else None

    def __call__(self, name: str) -> str:
        return self._url(name) if self._url is not None else _hashed_url(self.static_dir, name)


# Prompts and starter code are the same text on every request: render each once (a lesson page shows several).
@lru_cache(maxsize=512)
def markdown_filter(text: str) -> Markup:
    """Render Markdown (an exercise prompt) to HTML with the lessons' renderer."""
    return Markup(render_markdown(text or ""))


@lru_cache(maxsize=512)
def markdown_inline_filter(text: str) -> Markup:
    """Render one line of Markdown (a check's description, a link's note) without a paragraph around it."""
    return Markup(render_inline_markdown(text or ""))


@lru_cache(maxsize=512)
def highlight_filter(code: str, lang: str = "python") -> Markup:
    """Highlight code on the server with Pygments."""
    return Markup(highlight_code(code or "", lang))


def code_spans_filter(text: str | None) -> Markup:
    """Text whose `backtick` spans (the grader quotes code that way) become <code>, the rest escaped."""
    parts = str(text or "").split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: show it as it is
        return Markup(escape(str(text)))
    return Markup("").join(Markup("<code>%s</code>") % p if i % 2 else escape(p) for i, p in enumerate(parts))


# a bracket in a verdict's device: "cuda:0 (simulated on CPU)", "cuda:0, cuda:1 (2 ranks, simulated on CPU)"
DEVICE_BRACKET = re.compile(r" \(([^()]*)\)")


def status_where(duration_ms: int | None, device: str | None) -> str:
    """'61 ms on cuda:0, simulated on CPU' (one level of brackets in the status line, whatever device the verdict
    names: one GPU, the ranks of a job, a real card); no device when unknown."""
    if duration_ms is None:
        return ""
    label = DEVICE_BRACKET.sub(r", \1", device or "")
    return f"{duration_ms} ms on {label}" if label else f"{duration_ms} ms"


def duration_filter(seconds: float | None) -> str:
    """Say how long a span of seconds is, to the unit that matters: "40 s", "12 min", "3 h 5 min", "2 days"."""
    if seconds is None:
        return "–"
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min"
    if seconds < 2 * 86400:
        hours, minutes = divmod(seconds // 60, 60)
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{seconds // 86400} days"


def run_on(exercise=None, picked: str | None = None) -> dict:
    """The "Run on" picker of an exercise (None: a lesson block): its choices and the one selected."""
    choices = machine_choices.for_exercise(exercise.spec) if exercise is not None else machine_choices.CHOICES
    return {"choices": choices, "selected": machine_choices.pick(choices, picked, strict=False)}


def make_templates(settings: Settings, *, auto_reload: bool | None = None) -> Jinja2Templates:
    """Build the app's templates: the configured folder, and every global and filter templates may use.

    `auto_reload` re-reads a template whose file changed; by default everywhere but production, which skips the
    per-request mtime check.
    """
    reload = settings.env != "production" if auto_reload is None else auto_reload
    env = Environment(loader=FileSystemLoader(str(settings.templates_dir)), autoescape=select_autoescape(default=True),
                      auto_reload=reload)  # fmt: skip
    env.globals.update(current_user=current_user, csrf_token=csrf_token, csp_nonce=csp_nonce,
                       asset=AssetUrls(settings.static_dir, frozen=not reload), output_items=output_items,
                       placement_events=EVENT_WORDS, status_where=status_where,
                       run_on=run_on, uncounted_reasons=UNCOUNTED_REASONS)  # fmt: skip
    env.filters.update(markdown=markdown_filter, markdown_inline=markdown_inline_filter, highlight=highlight_filter,
                       duration=duration_filter, code_spans=code_spans_filter)
    return Jinja2Templates(env=env)


def render(request: Request, name: str, status_code: int = 200, **context):
    """Render a template of this request's app to an HTML response; `request` is always in the context."""
    templates: Jinja2Templates = request.app.state.templates
    return templates.TemplateResponse(request, name, context, status_code=status_code)


def render_text(request: Request, name: str, **context) -> str:
    """Render a template of this request's app to a string (a page kept in a cache)."""
    templates: Jinja2Templates = request.app.state.templates
    return templates.get_template(name).render(request=request, **context)
