"""Named dependencies for routes: the database session, who is asking, the course, CSRF and rate limits.

`require_csrf` is installed by `create_app` as an app-wide dependency: every POST/PUT/PATCH/DELETE route,
including ones added later by other areas, refuses a request without the session's token (form field
`csrf_token` or header `X-CSRF-Token`).
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Iterator
from ipaddress import ip_address, ip_network
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from limits import parse
from limits.storage import MemoryStorage
from limits.strategies import FixedWindowRateLimiter
from slowapi.util import get_remote_address
from sqlalchemy.orm import Session

from app.content.course import Course
from app.core import security
from app.core.config import Settings
from app.core.db import Database, pending_migrations
from app.core.errors import Refusal
from app.models import User

log = logging.getLogger(__name__)
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
CSRF_HEADER = "X-CSRF-Token"
CSRF_FIELD = "csrf_token"
# Cross-site form posts that carry no token of ours by design: an LMS sends the browser here from its own site.
# The launch is checked by its one-use state and nonce and the platform's signature instead
# (docs/security.md#lti-launches); /lti/login only stores a state and redirects.
CSRF_EXEMPT_PATHS = frozenset({"/lti/login", "/lti/launch"})
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
# what a lesson slug can look like; anything else is no lesson of ours, whatever the course holds
SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,99}$")


# --- database -----------------------------------------------------------------------------------------------


def open_database(settings: Settings) -> Database:
    """Open the configured database; warn (the site still starts) when it is not migrated to the newest revision."""
    db = Database(settings.database_url)
    if pending_migrations(settings.database_url):
        log.warning("the database at %s is not migrated to the newest revision: run `course db upgrade` "
                    "(make serve does); pages that read accounts, progress or comments fail until then",
                    settings.database_url)  # fmt: skip
    return db


def get_session(request: Request) -> Iterator[Session]:
    """Yield a database session; for unsafe methods a writer (BEGIN IMMEDIATE on SQLite). Routes commit."""
    db: Database = request.app.state.db
    with db.session(write=request.method not in SAFE_METHODS) as session:
        try:
            yield session
        except BaseException:
            session.rollback()
            raise


SessionDep = Annotated[Session, Depends(get_session)]


# --- who is asking ------------------------------------------------------------------------------------------


# The dependencies below only read what the middleware put on the request, so they are `async def`: FastAPI runs a
# plain `def` dependency in its thread pool, a hop out of the event loop and back for each. A submission's POST had
# four before its job could start: four such no-op dependencies cost 0.35 ms per request more than four async ones
# (in-process, 400 alternated requests, 0.57 vs 0.21 ms p50 on the 2-core machine; commit 2b015e5).


def _user(request: Request) -> User | None:
    return getattr(request.state, "user", None)


async def optional_user(request: Request) -> User | None:
    """Return the signed-in user, or None."""
    return _user(request)


async def current_user(request: Request) -> User:
    """Return the signed-in user; 401 if nobody is signed in."""
    user = _user(request)
    if user is None:
        raise HTTPException(401, "Sign in first: this needs an account (POST /api/auth/login or /login).")
    return user


async def learner_id(request: Request) -> str:
    """Return this visitor's learner id (an account's, or the anonymous one in the session)."""
    return request.state.learner_id


class SignInRequired(Refusal):
    """Nobody is signed in where an account is needed: 401, or, for a browser asking for a page, the log-in
    page with a way back (the handler in web/errors.py decides)."""


async def instructor(request: Request) -> User:
    """Return the signed-in instructor; SignInRequired for a visitor, 403 for a learner."""
    user = _user(request)
    if user is None:
        raise SignInRequired(401, "Sign in as an instructor first (POST /api/auth/login or /login).")
    if not user.is_instructor:
        raise HTTPException(403, f"This is for instructors only; you are signed in as {user.email}, a learner. An "
                                 "instructor account is made with `course users create EMAIL --instructor` or "
                                 "`course users promote EMAIL`.")
    return user


async def staff(request: Request) -> User:
    """Return the signed-in instructor or teaching assistant; SignInRequired for a visitor, 403 for a learner.
    What a TA may see within these routes (their sections' learners) the route checks with
    app.learning.sections.may_see."""
    user = _user(request)
    if user is None:
        raise SignInRequired(401, "Sign in as an instructor or a teaching assistant first (POST /api/auth/login or "
                                  "/login).")
    if not user.is_staff:
        raise HTTPException(403, f"This is for instructors only, and teaching assistants for their sections; you "
                                 f"are signed in as {user.email}, a learner. `course users promote EMAIL --ta` makes "
                                 "a teaching assistant.")
    return user


OptionalUser = Annotated[User | None, Depends(optional_user)]
CurrentUser = Annotated[User, Depends(current_user)]
InstructorUser = Annotated[User, Depends(instructor)]
StaffUser = Annotated[User, Depends(staff)]
LearnerId = Annotated[str, Depends(learner_id)]


# --- the course ---------------------------------------------------------------------------------------------


async def get_course(request: Request) -> Course:  # async: a sync dependency costs a thread hop per request
    """Return the course the app loaded at start-up (or last reloaded)."""
    return request.app.state.course


CourseDep = Annotated[Course, Depends(get_course)]


async def known_lesson(slug: str, course: CourseDep) -> str:
    """Return the lesson slug named in the path; 404 if the course has no such lesson."""
    if not SLUG_RE.match(slug) or course.get(slug) is None:
        raise HTTPException(404, f"There is no lesson {slug[:100]!r}.")
    return slug


KnownLesson = Annotated[str, Depends(known_lesson)]


# --- CSRF ---------------------------------------------------------------------------------------------------


async def require_csrf(request: Request) -> None:
    """Refuse (403) an unsafe request whose CSRF token is missing or not this session's."""
    if request.method in SAFE_METHODS or request.url.path in CSRF_EXEMPT_PATHS:
        return
    given = request.headers.get(CSRF_HEADER)
    if given is None and request.headers.get("content-type", "").startswith(FORM_TYPES):
        given = (await request.form()).get(CSRF_FIELD)  # Starlette caches the parsed form for the route
    if not security.tokens_match(request.session.get("csrf"), given if isinstance(given, str) else None):
        raise HTTPException(
            403,
            "CSRF token missing or wrong: reload the page and try again (scripts: GET /api/auth/csrf and send "
            f"the token as the {CSRF_HEADER} header).",
        )


# --- a learner's own verdicts -------------------------------------------------------------------------------


async def own_verdicts_stored(request: Request) -> None:
    """Hold a request until every verdict its learner was shown is stored (app/submissions/live.py shows a verdict
    while storing it): the attempts a page asks for right after a verdict include it. At once when none is being
    stored, or without a hub (an app without its lifespan), or for a route that waits itself (`waits_later`)."""
    hub = getattr(request.app.state, "live", None)
    if hub is not None and not getattr(request.scope.get("endpoint"), WAITS_LATER, False):
        await hub.stored(request.state.learner_id)


WAITS_LATER = "waits_for_own_verdicts_later"


def waits_later(endpoint):
    """Mark a route that waits for its learner's verdict writes itself, later than own_verdicts_stored would: a
    submission starts its job first, and only its row, written while the job runs, must come after them
    (LiveHub.submit). Put it under the route's decorator."""
    setattr(endpoint, WAITS_LATER, True)
    return endpoint


# --- rate limits (limits' fixed windows in this process's memory; one set per app so tests don't share them) --


def client_address(request: Request) -> str:
    """Return the key for per-address limits: the client's IPv4 address, or its IPv6 /64 (one host's usual share:
    counting single IPv6 addresses would give whoever holds a /64 2**64 fresh limits)."""
    host = get_remote_address(request)
    try:
        ip = ip_address(host)
    except ValueError:  # not an address (a test client's name, a Unix socket): count it as it is
        return host
    if ip.version == 4:
        return str(ip)
    if ip.ipv4_mapped is not None:  # ::ffff:192.0.2.1, an IPv4 client seen through an IPv6 socket
        return str(ip.ipv4_mapped)
    return str(ip_network(f"{ip}/64", strict=False))


# seconds between two sweeps of counters whose window has passed (only memory: a passed window reads as empty anyway)
SWEEP_S = 10.0


class Counters(MemoryStorage):
    """limits' in-memory counters, with the windows that have passed swept inline, at most every SWEEP_S.

    MemoryStorage sweeps from a `threading.Timer`: a new thread, started on a hit whenever the last one has run
    (10 ms after it started), so on a busy site nearly every hit. On the event loop's thread each start cost
    0.6-0.8 ms (it waits for the new thread to run; cProfile of the uvicorn process under 16 submitters, 256 hits),
    two hits per submission. Counting is unchanged: `get` resets a counter whose window has passed whether or not
    it was swept."""

    _next_sweep = 0.0

    def _MemoryStorage__schedule_expiry(self) -> None:  # the name MemoryStorage's own calls look up
        now = time.monotonic()
        if now >= self._next_sweep:
            self._next_sweep = now + SWEEP_S
            self._MemoryStorage__expire_events()


def make_limiter() -> FixedWindowRateLimiter:
    """Return a fresh in-memory rate limiter (one per app, so tests do not share counters)."""
    return FixedWindowRateLimiter(Counters())


def rate_limit(setting: str, scope: str, *, per: str = "address", what: str = "requests"):
    """Build a dependency enforcing `settings.<setting>` (e.g. "10/minute") per client address or learner.

    Over the limit: 429 with Retry-After (seconds) and a message naming `what` was limited.
    Example: `Depends(rate_limit("submission_rate_limit", "submit", per="learner", what="submissions"))`.
    """

    async def check(request: Request) -> None:  # async: in-memory counters, no thread hop (see optional_user)
        limiter: FixedWindowRateLimiter = request.app.state.limiter
        item = parse(getattr(request.app.state.settings, setting))
        key = request.state.learner_id if per == "learner" else client_address(request)
        if limiter.hit(item, scope, key):
            return
        reset_at, _remaining = limiter.get_window_stats(item, scope, key)
        retry = max(1, math.ceil(reset_at - time.time()))
        raise HTTPException(
            429,
            f"Too many {what}: the limit is {item.amount} per {item.multiples} {item.GRANULARITY.name}"
            f"{'s' if item.multiples > 1 else ''}. Try again in {retry} s.",
            headers={"Retry-After": str(retry)},
        )

    check.__name__ = f"rate_limit_{scope}"
    return check


def per_person_limits(setting: str, what: str) -> list:
    """Return the dependencies limiting `what` per learner (`settings.<setting>_rate_limit`) and per client
    address (`settings.<setting>_address_rate_limit`): a fresh cookie is a fresh learner, not a fresh person.

    The learner's limit is checked first, so a learner over their own limit spends nothing of the address's,
    which everyone behind it (a classroom's NAT) shares.
    """
    return [Depends(rate_limit(f"{setting}_rate_limit", setting, per="learner", what=what)),
            Depends(rate_limit(f"{setting}_address_rate_limit", f"{setting}-address",
                               what=f"{what} from your address (everyone behind it shares this limit)"))]


__all__ = [
    "SessionDep",
    "OptionalUser",
    "CurrentUser",
    "InstructorUser",
    "SignInRequired",
    "instructor",
    "staff",
    "StaffUser",
    "LearnerId",
    "CourseDep",
    "KnownLesson",
    "require_csrf",
    "own_verdicts_stored",
    "waits_later",
    "rate_limit",
    "per_person_limits",
    "make_limiter",
    "open_database",
]
