"""Exception handlers: refusals the framework makes before a route runs, reworded so a person can act on them,
and one handler per domain error the layers below raise (`create_app` registers each in `HANDLERS`)."""

from __future__ import annotations

import logging
from urllib.parse import quote

from fastapi import Request
from fastapi.exception_handlers import http_exception_handler, request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse
from starlette.exceptions import HTTPException
from starlette.routing import Match

from app.accounts.password_reset import ResetLinkInvalid
from app.accounts.users import AccountError
from app.community.comments import CommentError
from app.core.errors import Refusal
from app.lti.launch import LaunchRefused
from app.lti.platforms import PlatformError
from app.runner.base import Busy, Rejected, Unavailable
from app.submissions.live import Refused
from app.submissions.regrade import RegradeError
from app.submissions.views import NoTrace, RevealRefused
from app.web.deps import SignInRequired
from app.web.templating import render

# FastAPI's words when a JSON body cannot be decoded (e.g. it is not UTF-8)
FASTAPI_PARSE_ERROR = "There was an error parsing the body"

log = logging.getLogger(__name__)

# documented on every operation: any request may be refused for its body before a route reads it
COMMON_RESPONSES = {400: {"description": "The body is not UTF-8 JSON"},
                    413: {"description": "The body is over COURSE_MAX_BODY_BYTES"}}  # fmt: skip


async def bad_request(request: Request, exc: HTTPException):
    """Answer 400; FastAPI's own "error parsing the body" says what is wrong and what to send instead."""
    if exc.detail == FASTAPI_PARSE_ERROR:
        # FastAPI says this for a body that is not UTF-8 and for one nested deeper than the parser recurses
        exc = HTTPException(400, "The request body could not be read as JSON: it must be UTF-8 text holding one "
                                 "JSON object, not nested hundreds of levels deep. Fix the encoding (or the nesting) "
                                 "and send it again.", headers=exc.headers)
    return await http_exception_handler(request, exc)


async def validation_error(request: Request, exc: RequestValidationError):
    """Answer 422 as FastAPI does; a body that is no object because it was not sent as JSON says so."""
    content_type = request.headers.get("content-type", "none").split(";")[0].strip() or "none"
    if content_type == "application/json":
        return await request_validation_exception_handler(request, exc)
    advice = f"Send the body as a JSON object with Content-Type: application/json (not {content_type})"
    # the whole body is the "input" here; echoing it back (a password, a megabyte) helps nobody
    errors = [{"type": error["type"], "loc": error["loc"], "msg": advice}
              if error.get("type") == "model_attributes_type" and tuple(error.get("loc", ())) == ("body",)
              else error for error in exc.errors()]  # fmt: skip
    return await request_validation_exception_handler(request, RequestValidationError(errors))


def wants_page(request: Request) -> bool:
    """Say whether a browser asked for a page (GET or HEAD accepting HTML), which gets HTML instead of JSON."""
    return "text/html" in request.headers.get("accept", "") and request.method in ("GET", "HEAD")


async def forbidden(request: Request, exc: HTTPException):
    """Answer 403: a page saying why for a browser asking for one (an instructor page), JSON otherwise."""
    if wants_page(request):
        return render(request, "errors/403.html", status_code=403, detail=exc.detail)
    return await http_exception_handler(request, exc)


async def sign_in_required(request: Request, exc: SignInRequired):
    """Send a browser asking for a page to the log-in form, which comes back here; answer 401 otherwise."""
    if wants_page(request):
        back = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(f"/login?next={quote(back, safe='')}", status_code=303)
    return await http_exception_handler(request, HTTPException(401, exc.message))


async def method_not_allowed(request: Request, exc: HTTPException):
    """Answer 405 with every method this path accepts in Allow (Starlette names only the first route's)."""
    methods = set()
    for route in _leaf_routes(request.app.router.routes):
        match, _ = route.matches(request.scope)
        if match != Match.NONE:
            methods |= getattr(route, "methods", None) or set()
    if "GET" in methods:  # app.web.middleware.head answers HEAD wherever GET is routed
        methods.add("HEAD")
    allow = ", ".join(sorted(methods)) or (exc.headers or {}).get("Allow", "")
    detail = f"{request.method} is not allowed here; this address accepts {allow or 'no method'}."
    return await http_exception_handler(request, HTTPException(405, detail, headers={"Allow": allow}))


def _leaf_routes(routes):
    """Yield every route, looking inside included routers (FastAPI keeps them as one nested entry each)."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from _leaf_routes(inner.routes)
        else:
            yield route


# --- domain errors ------------------------------------------------------------------------------------------


async def refusal(request: Request, exc: Refusal):
    """Answer a refusal from below the web exactly as an HTTPException with its status (the 404 page included)."""
    handler = request.app.exception_handlers.get(exc.status_code, http_exception_handler)
    return await handler(request, HTTPException(exc.status_code, exc.message))


async def lti_refused(request: Request, exc: Refusal):
    """Answer a refused LTI login or launch: a page saying why for the browser the LMS sent (it posts a form, so
    `wants_page` cannot tell), JSON for anything that asked for JSON."""
    if "text/html" in request.headers.get("accept", ""):
        return render(request, "lti/refused.html", status_code=exc.status_code, detail=exc.message)
    return await http_exception_handler(request, HTTPException(exc.status_code, exc.message))


async def rejected(request: Request, exc: Rejected):
    """Answer code the runner refused: 413 for source over the size limit, else 400."""
    return await refusal(request, Refused.of(exc))


async def busy(request: Request, exc: Busy) -> JSONResponse:
    """Answer 429 for a full sandbox queue; the page shows "the course is busy, retrying in N s" and retries."""
    return JSONResponse(
        {"detail": f"The course is busy: every sandbox is taken and the queue is full. Retry in {exc.retry_after} s.",
         "reason": "busy", "retry_after": exc.retry_after},
        status_code=429, headers={"Retry-After": str(exc.retry_after)})


async def unavailable(request: Request, exc: Unavailable) -> JSONResponse:
    """Answer 503 when no job can be queued; nothing was stored, so running again costs nothing.

    The learner reads `why`; the operator's log gets the whole of it (which broker, what failed)."""
    log.warning("refused a job with 503: %s", exc)
    return JSONResponse(
        {"detail": f"The course cannot take code right now: {exc.why}. Nothing was stored; run again in "
                   f"{exc.retry_after} s.", "reason": "unavailable",
         "retry_after": exc.retry_after},
        status_code=503, headers={"Retry-After": str(exc.retry_after)})


# framework refusals first, then one handler per domain error type
HANDLERS = {
    400: bad_request,
    403: forbidden,
    405: method_not_allowed,
    RequestValidationError: validation_error,
    SignInRequired: sign_in_required,
    CommentError: refusal,
    AccountError: refusal,
    ResetLinkInvalid: refusal,
    RegradeError: refusal,
    LaunchRefused: lti_refused,
    PlatformError: lti_refused,
    Refused: refusal,
    RevealRefused: refusal,
    NoTrace: refusal,
    Rejected: rejected,
    Busy: busy,
    Unavailable: unavailable,
}
