"""Form bodies must be UTF-8 text: a field whose bytes are not is refused (400) rather than guessed at.

Browsers send a UTF-8 page's forms as UTF-8, so other bytes come from a broken or hostile client. Starlette would
decode them leniently (U+FFFD for URL-encoded fields, Latin-1 for multipart ones), silently changing the code a
learner runs or the comment they post; refusing says what was wrong and stores nothing.

`Utf8FormMiddleware` does this before any route or dependency reads the form (FastAPI parses a route's form
fields before its dependencies run, so the raw bytes are not available later). It sits inside
`BodyLimitMiddleware`, so it never holds more than `max_body_bytes`.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Message, Receive, Scope, Send

URLENCODED = "application/x-www-form-urlencoded"
MULTIPART = "multipart/form-data"


def non_utf8_field(body: bytes, content_type: str) -> str | None:
    """Return the name of the first form field (name or value) that is not UTF-8, or None when all are."""
    media = content_type.split(";")[0].strip().lower()
    if media == URLENCODED:
        return _urlencoded(body)
    if media == MULTIPART:
        return _multipart(body, content_type)
    return None


def _urlencoded(body: bytes) -> str | None:
    for pair in body.split(b"&"):
        name, _, value = pair.partition(b"=")
        raw_name = unquote_to_bytes(name.replace(b"+", b" "))
        if not pair.isascii():  # browsers percent-encode every other byte; Starlette reads raw ones as Latin-1
            return raw_name.decode("utf-8", "replace")
        for raw in (raw_name, unquote_to_bytes(value.replace(b"+", b" "))):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                return raw_name.decode("utf-8", "replace")
    return None


def _multipart(body: bytes, content_type: str) -> str | None:
    # the email package parses MIME multipart bodies; only text fields (no filename) must be UTF-8
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + body)
    if not message.is_multipart():
        return None
    for part in message.iter_parts():
        if part.get_filename() is not None:
            continue
        name = part.get_param("name", header="content-disposition") or "?"
        try:
            (part.get_payload(decode=True) or b"").decode("utf-8")
        except UnicodeDecodeError:
            return str(name)
    return None


def refusal(field: str) -> str:
    """The 400 message for a field that is not UTF-8."""
    return (f"The form field `{field}` is not valid UTF-8 text, so nothing was saved or run. Send the form as "
            "UTF-8, percent-encoding every non-ASCII byte (browsers do both for this site's pages), and try again.")


class Utf8FormMiddleware:
    """Read a form request's body, refuse it (400, JSON {"detail"}) if a field is not UTF-8, else replay it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        content_type = _header(scope, b"content-type")
        if scope["type"] != "http" or not content_type.lower().startswith((URLENCODED, MULTIPART)):
            return await self.app(scope, receive, send)
        chunks, more = [], True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":  # the client left, or the body limit already answered 413
                return None
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        bad = non_utf8_field(body, content_type)
        if bad is not None:
            return await _refuse(send, refusal(bad))
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: wait for the disconnect, as the server would

        await self.app(scope, replay, send)


def _header(scope: Scope, name: bytes) -> str:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return ""


async def _refuse(send: Send, message: str) -> None:
    body = json.dumps({"detail": message}).encode()
    await send({"type": "http.response.start", "status": 400, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})  # fmt: skip
    await send({"type": "http.response.body", "body": body})
