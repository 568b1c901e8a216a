"""Rendered lesson pages for first-time visitors, kept in memory.

A visitor who arrives without a session (a new reader, a search engine, most of the traffic of a course site)
sees a lesson page that differs from every other new visitor's only by its CSRF token: no progress, no attempts,
the same comment thread. That page is rendered once with a placeholder token and served with the visitor's own
token put in, so reading a lesson costs a join of bytes instead of a template render and several queries.
Everyone with a session (returning learners, signed-in users, instructors) gets the page rendered for them.

Every cache forgets everything when a comment is written in this process, and an entry is refreshed after
`TTL_S` seconds, which bounds how stale a page can be when another web worker wrote the comment. Only one
request renders a page at a time: the others wait for it (nothing cached yet) or keep getting the previous copy
(refreshing), so a busy lesson never renders sixty-four times at once when its entry expires. A refresh runs in the
background: the request that finds the entry stale gets the previous copy too, instead of waiting for a render
(4-6 ms of CPU per lesson page, in a worker thread that holds the GIL), which every TTL_S was the slowest page
read of that lesson.
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
import time
import weakref
from collections.abc import Awaitable, Callable

from sqlalchemy import event
from starlette.responses import Response

from app.models import Comment
from app.web.middleware.headers import encoded_headers, new_nonce
from app.web.middleware.identity import new_visitor_session
from app.web.middleware.session import VARY_COOKIE, SessionCookie

log = logging.getLogger(__name__)

# seconds a cached page may lag behind a comment written by another web worker
TTL_S = 2.0
# Unguessable placeholders, so no lesson text can contain them by accident.
PLACEHOLDER = "csrf-placeholder-" + secrets.token_hex(16)
NONCE_PLACEHOLDER = "nonce-placeholder-" + secrets.token_hex(16)
_CSRF = PLACEHOLDER.encode()
_PLACEHOLDERS = re.compile(b"(" + re.escape(_CSRF) + b"|" + re.escape(NONCE_PLACEHOLDER.encode()) + b")")


class CachedPage:
    """A rendered page with placeholders for the visitor's CSRF token and the response's CSP nonce, kept as the
    bytes between them, so that serving it is one join (two `bytes.replace` over a 70 KB page cost more than the
    rest of the cached path). Where each placeholder stood is kept as two index lists: a copy of the parts with
    those items set is what `b"".join` takes (a generator over the parts cost a third of the cached path)."""

    CONTENT_TYPE = (b"content-type", b"text/html; charset=utf-8")

    def __init__(self, html: str) -> None:
        self.body = html.encode("utf-8")
        self.born = time.monotonic()
        # even items: page bytes; odd items: a placeholder, filled in per response
        self.parts: list[bytes] = _PLACEHOLDERS.split(self.body)
        self.csrf_at = [i for i in range(1, len(self.parts), 2) if self.parts[i] == _CSRF]
        self.nonce_at = [i for i in range(1, len(self.parts), 2) if self.parts[i] != _CSRF]

    def fresh(self) -> bool:
        return time.monotonic() - self.born <= TTL_S

    def html(self, csrf_token: str, nonce: str) -> bytes:
        """Return the page's bytes carrying this visitor's CSRF token and this response's nonce."""
        parts = self.parts.copy()
        token, nonce_b = csrf_token.encode(), nonce.encode()
        for i in self.csrf_at:
            parts[i] = token
        for i in self.nonce_at:
            parts[i] = nonce_b
        return b"".join(parts)

    def response(self, csrf_token: str, nonce: str) -> Response:
        """Return the page as an HTML response carrying this visitor's CSRF token and this response's nonce."""
        return Response(self.html(csrf_token, nonce), media_type="text/html; charset=utf-8")

    async def send(self, send, csrf_token: str, nonce: str, headers: list[tuple[bytes, bytes]]) -> None:
        """Send the page as the whole response, with `headers` after what `response()` would carry."""
        body = self.html(csrf_token, nonce)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", str(len(body)).encode()), self.CONTENT_TYPE, *headers]})
        await send({"type": "http.response.body", "body": body})


class PageCache:
    """One app's cached first-visit pages, keyed by whatever identifies a page's content."""

    def __init__(self) -> None:
        self._pages: dict[tuple, CachedPage] = {}
        self._locks: dict[tuple, asyncio.Lock] = {}
        self._refreshing: set[tuple] = set()
        self._tasks: set[asyncio.Task] = set()
        _caches.add(self)

    async def page(self, key: tuple, render: Callable[[], Awaitable[str]]) -> CachedPage:
        """Return the cached page for key, rendering it (once, whoever asks at the same time) when nothing is
        cached; a stale page is returned as it is while a background task renders its successor.

        `render` may run after this request is answered: it must not read or change what the request's own
        response is made of (app/web/routes/lessons.py renders from a copy of the request)."""
        page = self._pages.get(key)
        if page is not None:
            if not page.fresh() and key not in self._refreshing:
                self._refreshing.add(key)
                task = asyncio.get_running_loop().create_task(self._refresh(key, render))
                self._tasks.add(task)  # the loop keeps only a weak reference to a task
                task.add_done_callback(self._tasks.discard)
            return page
        async with self._locks.setdefault(key, asyncio.Lock()):
            page = self._pages.get(key)
            return page if page is not None else self._store(key, await render())

    async def _refresh(self, key: tuple, render: Callable[[], Awaitable[str]]) -> None:
        try:
            self._store(key, await render())
        except Exception:  # the stale copy stays; the next request after it tries again
            log.exception("refreshing the cached page %s failed; new visitors get the previous copy", key[1:])
        finally:
            self._refreshing.discard(key)

    def servable(self, key: tuple) -> CachedPage | None:
        """Return the page for key if it is cached and fresh, or being refreshed by another request (which
        `page()` would serve too), else None: the caller goes to the route, whose `page()` renders it."""
        page = self._pages.get(key)
        return page if page is not None and (page.fresh() or key in self._refreshing) else None

    def _store(self, key: tuple, html: str) -> CachedPage:
        page = self._pages[key] = CachedPage(html)
        return page

    def clear(self) -> None:
        """Forget every page (a comment changed)."""
        self._pages.clear()


_caches: "weakref.WeakSet[PageCache]" = weakref.WeakSet()


def invalidate(*_args) -> None:
    """Forget every cached page of every app in this process."""
    for cache in list(_caches):
        cache.clear()


for _event in ("after_insert", "after_update", "after_delete"):
    event.listen(Comment, _event, invalidate)


class FirstVisitMiddleware:
    """Answer a new visitor's GET of a lesson page straight from the cache, before the rest of the site's stack.

    The outermost of the site's middleware (app/main.py). A request whose Cookie header names no session is a new
    visitor's (no progress, no account: what IdentityMiddleware would say), and its whole answer is known here: the
    cached page with a fresh CSRF token and CSP nonce put in, with the headers the middleware below would add: the
    session cookie holding the learner id and the token (`SessionCookie.set_cookie`, which SessionMiddleware uses,
    and `Vary: Cookie`) and the security headers with the nonce in the policy (`headers.encoded_headers`, which
    SecurityHeadersMiddleware uses). Six middleware layers, two send wrappers each, were a fifth of a cached page's
    CPU; the headers are the same functions' bytes, so both ways give the same answer.

    A fresh cached page is served here, and so is a stale one while another request refreshes it (every request
    that arrived meanwhile went through the whole route before: with 64 connections a few hundred per expiry, at
    ten times a cached page's cost). Anything else (a session, a query string, a page not cached, or stale with no
    refresh under way) goes on to the lesson route, which renders and refreshes the cache and serves a visitor
    whose cookie is not valid the same cached page.
    """

    PREFIX = "/lessons/"

    def __init__(self, app, cookie: SessionCookie, production: bool) -> None:
        self.app = app
        self.cookie = cookie
        self.production = production

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET" and not scope.get("query_string"):
            path: str = scope["path"]
            if path.startswith(self.PREFIX) and self.cookie.absent(scope):
                app_state = scope["app"].state
                page = app_state.page_cache.servable((id(app_state.course), path[len(self.PREFIX):]))
                if page is not None:
                    session, nonce = new_visitor_session(), new_nonce()
                    return await page.send(send, session["csrf"], nonce, [
                        VARY_COOKIE, self.cookie.set_cookie(session),
                        *encoded_headers(path, nonce, self.production)])
        await self.app(scope, receive, send)
