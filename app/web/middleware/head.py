"""HEAD answered like GET, without the body, on every GET route (FastAPI routes GET only; monitors and load
balancers use HEAD).

The request goes on as a GET, so it gets exactly GET's status and headers (Content-Length included); the body is
dropped here. A streaming answer (server-sent events) is ended as soon as its headers are out: the app is told
the client left, as it would be when a browser closes the stream.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class HeadAsGetMiddleware:
    """Turn HEAD into GET for the app and send back GET's status and headers with an empty body."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            return await self.app(scope, receive, send)
        done = False

        async def receive_until_done() -> Message:
            if done:
                return {"type": "http.disconnect"}
            return await receive()

        async def send_headers_only(message: Message) -> None:
            nonlocal done
            if done:
                return
            if message["type"] == "http.response.start":
                await send(message)
            elif message["type"] == "http.response.body":
                done = True
                await send({"type": "http.response.body", "body": b"", "more_body": False})

        await self.app({**scope, "method": "GET"}, receive_until_done, send_headers_only)
