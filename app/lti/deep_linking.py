"""Deep linking (LTI Deep Linking 2.0): an LMS instructor picks lessons and exercises; the course answers with a
signed list of links (ltiResourceLink content items) that the browser posts back to the LMS's return URL.

An exercise's item carries a line item (out of 100, its resource id the exercise's slug), so the LMS makes its
gradebook column with the link; the grade sender finds that same column by resource id later instead of making
a second one (app/lti/passback.py).
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from joserfc import jwt
from sqlalchemy.orm import Session

from app.content.course import Course
from app.lti import keys
from app.lti.launch import DEPLOYMENT_ID, LTI, MESSAGE_TYPE, VERSION, LaunchRefused
from app.lti.passback import SCORE_MAXIMUM
from app.models.lti import LtiPlatform

CONTENT_ITEMS = "https://purl.imsglobal.org/spec/lti-dl/claim/content_items"
DATA = "https://purl.imsglobal.org/spec/lti-dl/claim/data"
MSG = "https://purl.imsglobal.org/spec/lti-dl/claim/msg"


@dataclass(frozen=True)
class Choice:
    """One thing the picker offers: a lesson, or an exercise in its lesson."""

    kind: str  # "lesson" or "exercise"
    slug: str
    title: str
    path: str  # on this site
    lesson_title: str


def choices(course: Course) -> list[Choice]:
    """Every lesson, each followed by the exercises it places, in course order."""
    found = []
    for lesson in course.lessons:
        found.append(Choice("lesson", lesson.slug, lesson.title, lesson.url, lesson.title))
        for slug in lesson.placed_exercises():
            exercise = course.exercises.get(slug)
            if exercise is not None:
                found.append(Choice("exercise", slug, exercise.title, f"{lesson.url}#exercise-{slug}", lesson.title))
    return found


def origin(url: str) -> str:
    """The scheme, host and port of a URL, checked to be plain http(s) (it goes into a CSP directive)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or any(c in parts.netloc for c in " ;,'\""):
        raise LaunchRefused(400, f"The LMS's deep-linking return URL {url[:200]!r} is not an http(s) address.")
    return f"{parts.scheme}://{parts.netloc}"


def response_jwt(session: Session, *, request: dict, picked: list[Choice], site_url: str) -> str:
    """The signed LtiDeepLinkingResponse for the picked items (the caller commits: the first key may be made)."""
    platform = session.get(LtiPlatform, request["platform_id"])
    if platform is None:
        raise LaunchRefused(400, "The LMS this picker was opened from is no longer registered.")
    items = []
    for choice in picked:
        item = {"type": "ltiResourceLink", "title": choice.title, "url": site_url + choice.path}
        if choice.kind == "exercise":
            item["lineItem"] = {"scoreMaximum": SCORE_MAXIMUM, "label": choice.title, "resourceId": choice.slug,
                                "tag": "exercise"}
        items.append(item)
    now = int(time.time())
    claims = {"iss": platform.client_id, "aud": platform.issuer, "iat": now, "exp": now + 600,
              "nonce": secrets.token_urlsafe(16), DEPLOYMENT_ID: request["deployment_id"],
              MESSAGE_TYPE: "LtiDeepLinkingResponse", VERSION: "1.3.0", CONTENT_ITEMS: items,
              MSG: f"Added {len(items)} item{'s' if len(items) != 1 else ''} from the course."}  # fmt: skip
    if request.get("data") is not None:
        claims[DATA] = request["data"]
    key = keys.signing_key(session)
    return jwt.encode({"alg": "RS256", "kid": key.kid, "typ": "JWT"}, claims, key)


__all__ = ["Choice", "choices", "origin", "response_jwt", "LTI"]
