"""A ceiling on request bodies, enforced before any route reads them.

`BodyLimitMiddleware` refuses with 413 as soon as it knows a body is too large: at once when Content-Length says
so (nothing is read), or, for a chunked body, when the bytes received so far pass the limit. Either way the app
never holds more than `max_body_bytes` of one request in memory. Routes keep their own, smaller limits (a
program's size, a comment's length) with messages about those; this one guards everything else.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


class BodyLimitMiddleware:
    """Refuse (413, JSON {"detail"}) any HTTP request whose body is over `max_bytes`."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = _declared_length(scope)
        if declared is not None and declared > self.max_bytes:
            return await self._refuse(send, declared)
        received = 0
        refused = False  # once the 413 is sent, whatever the app still tries to send is dropped
        started = False

        async def counting_receive() -> Message:
            nonlocal received, refused
            message = await receive()
            if message["type"] == "http.request" and not refused:
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    if not started:  # a route that answered before reading everything has had its say
                        await self._refuse(send, None)
                    refused = True
                    return {"type": "http.disconnect"}  # the route stops reading, as if the client had left
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if not refused:
                started = True
                await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except Exception:
            if not refused:  # a route reading a refused body fails (ClientDisconnect); the 413 already went
                raise

    async def _refuse(self, send: Send, declared: int | None) -> None:
        limit = f"{self.max_bytes / 1024:.0f} KiB"
        size = f"is {declared / 1024:.0f} KiB; the limit is {limit}" if declared else f"is over the limit of {limit}"
        detail = f"The request body {size}. Send less (a program or a comment is far smaller) and try again."
        body = json.dumps({"detail": detail}).encode()
        await send({"type": "http.response.start", "status": 413, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"connection", b"close")]})  # fmt: skip
        await send({"type": "http.response.body", "body": body})
