"""Security headers on every response, from one middleware: the outermost but one, so refusals made by the
middleware below it (413, 400) and static files carry them too. The one outside it, the first-visit page cache
(page_cache.py), answers only with a cached lesson page, whose headers it takes from `encoded_headers` here.

The Content-Security-Policy is strict because the templates allow it: no inline script, no `eval`, nothing from
another origin, and no inline style element except the one the code editor (CodeMirror) builds, which carries
this response's nonce (`csp_nonce` in templates; a fresh one per response). Style attributes are allowed: the
browser's own editing of that editor writes them. It is the second wall behind escaping and nh3 for the text
learners write (comments, program output): a script that slipped through would not run.

The API explorers (/docs, /redoc) get the same policy with inline styles, which Swagger UI and ReDoc set from
their scripts, and workers from blob: URLs (ReDoc's search); they load their files from this site
(/openapi-assets) and run no inline script. ReDoc's "powered by" logo from its CDN stays blocked (it hides itself).
The site's own SVG files (the lessons' figures) may use their inline <style> when opened on their own.
"""

from __future__ import annotations

import secrets

from starlette.types import ASGIApp, Message, Receive, Scope, Send

CSP = "; ".join([
    "default-src 'self'",
    "script-src 'self'",  # files of this origin only: no inline script, no eval
    "style-src 'self' 'nonce-{nonce}'",
    # Chromium's own editing of the code editor (a contenteditable) writes style attributes when typed text replaces
    # a selection of several lines; attributes run no code, nh3 strips them from comments, and with nothing loaded
    # from elsewhere CSS cannot carry data away. Style elements still need the nonce.
    "style-src-attr 'unsafe-inline'",
    "img-src 'self' data:",
    "object-src 'none'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
    "form-action 'self'",
])  # fmt: skip
# The API explorers build their layout with inline style elements (ReDoc) and attributes (Swagger UI) from their
# own bundled scripts; inline styles cannot run code, and these pages show nothing that learners wrote. (No nonce
# here: a nonce in the directive would make browsers ignore 'unsafe-inline'.)
DOCS_CSP = CSP.replace("style-src 'self' 'nonce-{nonce}'", "style-src 'self' 'unsafe-inline'") + \
    "; worker-src 'self' blob:"
DOCS_PATHS = frozenset({"/docs", "/redoc"})
# The lessons' figures (static/figures/*.svg) style themselves, light and dark, with a <style> element. Inside a
# page they are images, which the page's policy does not reach; opened on their own they are documents with this
# policy, and their own, fixed styles may apply.
SVG_CSP = CSP.replace("style-src 'self' 'nonce-{nonce}'", "style-src 'self' 'unsafe-inline'")
# bytes of randomness in a CSP nonce
NONCE_BYTES = 16
# Powerful features no page of the course uses: a script that got in could not ask for them either.
PERMISSIONS_POLICY = ", ".join(f"{feature}=()" for feature in (
    "accelerometer", "autoplay", "camera", "display-capture", "encrypted-media", "geolocation", "gyroscope",
    "hid", "idle-detection", "magnetometer", "microphone", "midi", "payment", "publickey-credentials-get",
    "screen-wake-lock", "serial", "usb", "xr-spatial-tracking",
))  # fmt: skip
# seconds browsers remember to use HTTPS only (one year); sent in production, where the site is served over TLS
HSTS_MAX_AGE_S = 365 * 24 * 3600

HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",  # frame-ancestors' older spelling, for browsers that predate it
    "Referrer-Policy": "same-origin",  # a reset link's token in the path never leaves for another site
    "Cross-Origin-Opener-Policy": "same-origin",
    "Permissions-Policy": PERMISSIONS_POLICY,
}


def content_security_policy(path: str, nonce: str, form_action: str | None = None) -> str:
    """Return the Content-Security-Policy for a response to `path` whose style element carries `nonce`;
    `form_action` is one more origin its forms may post to (the LTI deep-linking answer's LMS)."""
    if path in DOCS_PATHS:
        return DOCS_CSP
    if path.startswith("/static/") and path.endswith(".svg"):
        return SVG_CSP
    policy = CSP.format(nonce=nonce)
    return policy.replace("form-action 'self'", f"form-action 'self' {form_action}") if form_action else policy


def security_headers(path: str, *, nonce: str, production: bool, form_action: str | None = None) -> dict[str, str]:
    """Return the security headers for a response to `path`."""
    headers = {"Content-Security-Policy": content_security_policy(path, nonce, form_action), **HEADERS}
    if production:
        headers["Strict-Transport-Security"] = f"max-age={HSTS_MAX_AGE_S}"
    return headers


class SecurityHeadersMiddleware:
    """Add the security headers to every HTTP response (CSP, nosniff, frame and referrer rules, COOP, HSTS).

    Each request gets a fresh nonce in `scope["state"]["csp_nonce"]`, which templates put on the page.
    """

    def __init__(self, app: ASGIApp, production: bool) -> None:
        self.app = app
        self.production = production

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        nonce = new_nonce()
        scope.setdefault("state", {})["csp_nonce"] = nonce
        extra = encoded_headers(scope["path"], nonce, self.production)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                # a route that lets a form post to another origin says so in request.state (only the deep-linking
                # answer to an LMS, app/web/routes/lti.py); every other response gets the headers made above
                form_action = scope["state"].get("form_action")
                headers = extra if form_action is None else _encoded(security_headers(
                    scope["path"], nonce=nonce, production=self.production, form_action=form_action))
                # ours replace any the app set; built as one list (MutableHeaders scans the list per header)
                message["headers"] = [h for h in message.get("headers") or () if h[0].lower() not in _NAMES] + headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


def new_nonce() -> str:
    """A fresh CSP nonce for one response."""
    return secrets.token_urlsafe(NONCE_BYTES)


def encoded_headers(path: str, nonce: str, production: bool) -> list[tuple[bytes, bytes]]:
    """`security_headers(path, ...)` as an ASGI header list; a page's or an API answer's is the list encoded at
    import with the nonce put into the policy (the first-visit page, app/web/middleware/page_cache.py, sends it)."""
    if path in DOCS_PATHS or path.startswith("/static/"):
        return _encoded(security_headers(path, nonce=nonce, production=production))
    return [(b"content-security-policy", _CSP_HEAD + nonce.encode() + _CSP_TAIL),
            *(_FIXED_PRODUCTION if production else _FIXED)]


_NAMES = frozenset(name.lower().encode("latin-1") for name in [*HEADERS, "Content-Security-Policy",
                                                                   "Strict-Transport-Security"])


def _encoded(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    return [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()]


# The headers of every response but the API explorers' and static files', encoded once: CSP around its nonce,
# then the fixed ones (the order security_headers gives them)
_CSP_HEAD, _CSP_TAIL = (part.encode("latin-1") for part in CSP.split("{nonce}"))
_FIXED = _encoded(HEADERS)
_FIXED_PRODUCTION = _FIXED + [(b"strict-transport-security", f"max-age={HSTS_MAX_AGE_S}".encode())]
