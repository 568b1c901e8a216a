"""The signed session cookie: Starlette's SessionMiddleware's cookie, made and checked the same way, for less CPU.

Every first visit gets a session (a learner id and a CSRF token) and so a freshly signed cookie; a lesson page for
a new visitor is otherwise a join of cached bytes, so what the cookie costs is a large share of what the page costs.
`SessionCookie` reads and writes the cookie exactly as Starlette's SessionMiddleware does (name, signed value,
flags, the cleared-session cookie), and `SessionMiddleware` here is a pure ASGI middleware with Starlette's
behaviour (`scope["session"]` a `starlette.middleware.sessions.Session`, `Vary: Cookie` once the session is read,
a Set-Cookie only when it changed) without its per-request objects (an `HTTPConnection` to find the cookie,
`MutableHeaders` to add two headers):

- `QuickSigner` keeps itsdangerous' HMAC key, derived from the secret once (itsdangerous derives it again for
  every signature), and the HMAC state of that key; the bytes are identical, so cookies signed before it still
  verify, and checking a cookie is still itsdangerous' own `unsign` (signature, then age).
- The Set-Cookie header is one bytes concatenation around the signed value; a returning visitor whose session did
  not change gets no Set-Cookie and no Vary (as with Starlette's).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from base64 import b64decode, b64encode, urlsafe_b64encode
from json.encoder import c_make_encoder, encode_basestring_ascii

import itsdangerous
from itsdangerous.encoding import int_to_bytes
from itsdangerous.exc import BadSignature
from itsdangerous.signer import HMACAlgorithm
from starlette.datastructures import Secret
from starlette.middleware.sessions import Session
from starlette.requests import cookie_parser
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class _OneShotHMAC(HMACAlgorithm):
    """HMAC-SHA1 (itsdangerous' default) through `hmac.digest`, which returns what `hmac.new(...).digest()` does."""

    def __init__(self) -> None:
        super().__init__(hashlib.sha1)

    def get_signature(self, key: bytes, value: bytes) -> bytes:
        return hmac.digest(key, value, "sha1")


class QuickSigner(itsdangerous.TimestampSigner):
    """itsdangerous' TimestampSigner with its derived key kept (one secret, no rotation: the session's case)."""

    def __init__(self, secret_key: str) -> None:
        super().__init__(secret_key, algorithm=_OneShotHMAC())
        self._key = super().derive_key()
        self._mac = hmac.new(self._key, digestmod=hashlib.sha1)
        self._second, self._stamp = -1, b""

    def derive_key(self, secret_key: str | bytes | None = None) -> bytes:
        return self._key if secret_key is None or secret_key == self.secret_keys[-1] else super().derive_key(secret_key)

    def sign(self, value: str | bytes) -> bytes:
        """`TimestampSigner.sign`'s bytes (value.timestamp.signature, each part URL-safe base64 without padding),
        with the timestamp's encoding kept for the second it stands for."""
        now = int(time.time())
        if now != self._second:
            self._second, self._stamp = now, b"." + urlsafe_b64encode(int_to_bytes(now)).rstrip(b"=")
        signed = (value.encode() if isinstance(value, str) else value) + self._stamp
        mac = self._mac.copy()  # the key's HMAC state, padded and hashed once
        mac.update(signed)
        return signed + b"." + urlsafe_b64encode(mac.digest()).rstrip(b"=")


class SessionCookie:
    """The session cookie's name, flags and signer: reads a request's session, writes the Set-Cookie header.

    One instance serves `SessionMiddleware` and the first-visit page (app/web/middleware/page_cache.py), which
    answers a visitor without a cookie before the session middleware runs and must set the same cookie."""

    def __init__(self, secret_key: str | Secret, name: str = "session", max_age: int | None = 14 * 24 * 60 * 60,
                 path: str = "/", same_site: str = "lax", https_only: bool = False, domain: str | None = None,
                 partitioned: bool = False) -> None:
        self.name = name
        self.max_age = max_age
        self.signer = QuickSigner(str(secret_key))
        flags = "httponly; samesite=" + same_site
        if https_only:  # the Secure flag can be used with HTTPS only
            flags += "; secure"
        if domain is not None:
            flags += f"; domain={domain}"
        if partitioned:
            flags += "; partitioned"
        # Starlette's header values, split around the signed data (encoded once here)
        self._head = f"{name}=".encode("latin-1")
        age = f"Max-Age={max_age}; " if max_age is not None else ""
        self._tail = f"; path={path}; {age}{flags}".encode("latin-1")
        self.cleared = (b"set-cookie", f"{name}=null; path={path}; "
                        f"expires=Thu, 01 Jan 1970 00:00:00 GMT; {flags}".encode("latin-1"))

    def set_cookie(self, session: dict) -> tuple[bytes, bytes]:
        """The Set-Cookie header that stores `session` (signed JSON, as Starlette writes it)."""
        return b"set-cookie", self._head + self.signer.sign(b64encode(_json(session).encode("utf-8"))) + self._tail

    def load(self, scope: Scope) -> tuple[Session, bool]:
        """Return the request's session (empty when it has no cookie or a bad one) and whether it was empty."""
        for name, value in scope["headers"]:
            if name == b"cookie":  # the first Cookie header, as Starlette's `request.cookies` reads it
                cookie = cookie_parser(value.decode("latin-1")).get(self.name)
                if cookie is None:
                    break
                try:
                    data = self.signer.unsign(cookie.encode("utf-8"), max_age=self.max_age)
                    return Session(json.loads(b64decode(data))), False
                except BadSignature:
                    break
        return Session(), True

    def absent(self, scope: Scope) -> bool:
        """Whether the request surely carries no session (no Cookie header names it): a new visitor's."""
        mark = self._head
        return not any(name == b"cookie" and mark in value for name, value in scope["headers"])


class SessionMiddleware:
    """`starlette.middleware.sessions.SessionMiddleware`'s cookie and `scope["session"]`, through a SessionCookie."""

    def __init__(self, app: ASGIApp, cookie: SessionCookie) -> None:
        self.app = app
        self.cookie = cookie

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        session, was_empty = self.cookie.load(scope)
        scope["session"] = session

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                session: Session = scope["session"]
                if session.accessed:
                    headers = message["headers"] = list(message.get("headers") or ())
                    _add_vary_cookie(headers)
                    if session.modified and session:  # session data to keep
                        headers.append(self.cookie.set_cookie(session))
                    elif session.modified and not was_empty:  # the session was cleared
                        headers.append(self.cookie.cleared)
            await send(message)

        await self.app(scope, receive, send_wrapper)


VARY_COOKIE = (b"vary", b"Cookie")


def _add_vary_cookie(headers: list[tuple[bytes, bytes]]) -> None:
    """`MutableHeaders.add_vary_header("Cookie")` on a raw header list: one Vary header, with Cookie added."""
    for i, (name, value) in enumerate(headers):
        if name.lower() == b"vary":
            rest = [(n, v) for n, v in headers[i + 1:] if n.lower() != b"vary"]
            headers[i:] = [(b"vary", value + b", Cookie"), *rest]
            return
    headers.append(VARY_COOKIE)


# json.dumps(session)'s text (its default arguments) from json's C encoder made once: json.dumps builds an encoder
# and checks its arguments on every call, which cost twice the encoding of a new visitor's two-key session
_C_ENCODER = c_make_encoder and c_make_encoder(None, json.JSONEncoder().default, encode_basestring_ascii, None,
                                               ": ", ", ", False, False, True)


def _json(session: dict) -> str:
    return "".join(_C_ENCODER(session, 0)) if _C_ENCODER else json.dumps(session)
