"""`/instructor/` goes to `/instructor`: the same redirect as Starlette's `redirect_slashes`, but relative.

Starlette's own builds an absolute URL from the request's Host header, which the sender controls: `GET
/instructor/` with `Host: evil.example` was sent to `http://evil.example/instructor`. This one answers with a
path only (`Location: /instructor`), so the browser stays on the site it asked; `create_app` turns Starlette's off.
"""

from __future__ import annotations

from fastapi import Request
from starlette.responses import RedirectResponse
from starlette.routing import Match


def _matches(request: Request, path: str) -> bool:
    scope = {**request.scope, "path": path}
    return any(route.matches(scope)[0] != Match.NONE for route in request.app.router.routes)


def slash_redirect(request: Request) -> RedirectResponse | None:
    """Return a relative 307 to the path with its trailing slash toggled, if only that form is a route; else None."""
    path = request.scope["path"]
    if request.scope["type"] != "http" or path == "/" or _matches(request, path):
        return None  # the path is a route that answered 404 itself (an unknown lesson): nothing to redirect
    other = path.rstrip("/") if path.endswith("/") else path + "/"
    # "//host" or "/\host" is another site to a browser, whatever the router makes of it
    if not other.startswith("/") or other[1:2] in ("/", "\\") or not _matches(request, other):
        return None
    query = request.scope.get("query_string", b"").decode("latin-1")
    return RedirectResponse(request.scope.get("root_path", "") + other + (f"?{query}" if query else ""),
                            status_code=307)  # fmt: skip
