"""The LMSs registered with the course (`course lti add-platform`) and their signing keys.

A platform is known by its issuer and the client id it gave the course; several may be registered at once (a
Canvas and a Moodle). Its key set is fetched from its JWKS URL when a launch needs it and kept for
`COURSE_LTI_JWKS_CACHE_S`; an id_token signed with a key id the cached set lacks fetches it again (the platform
rotated its keys), at most once per launch.
"""

from __future__ import annotations

import threading
import time

import httpx
from joserfc.jwk import KeySet
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.errors import Refusal
from app.models.lti import LtiPlatform


class PlatformError(Refusal):
    """A platform the course cannot use as asked (unknown, ambiguous, its keys unreachable): what to do."""


def add_platform(session: Session, *, name: str, issuer: str, client_id: str, auth_login_url: str,
                 auth_token_url: str, jwks_url: str, deployment_ids: list[str]) -> LtiPlatform:  # fmt: skip
    """Register a platform, or update the one of this name (its deployments are added to those it had)."""
    platform = session.scalar(select(LtiPlatform).where(LtiPlatform.name == name))
    if platform is None:
        platform = LtiPlatform(name=name, deployment_ids=[])
        session.add(platform)
    platform.issuer, platform.client_id = issuer, client_id
    platform.auth_login_url, platform.auth_token_url, platform.jwks_url = auth_login_url, auth_token_url, jwks_url
    platform.deployment_ids = sorted({*platform.deployment_ids, *deployment_ids})
    session.flush()
    return platform


def find(session: Session, *, issuer: str, client_id: str | None) -> LtiPlatform:
    """Return the platform registered for this issuer (and client id, when the login named one)."""
    query = select(LtiPlatform).where(LtiPlatform.issuer == issuer)  # exact: the id_token's iss must equal it
    if client_id:
        query = query.where(LtiPlatform.client_id == client_id)
    found = list(session.scalars(query))
    if not found:
        named = f" and client id {client_id[:100]!r}" if client_id else ""
        raise PlatformError(400, f"No LMS with issuer {issuer[:200]!r}{named} is registered with this course; its "
                                 "administrator registers "
                                 "it with `course lti add-platform` (docs/authoring.md#connecting-an-lms).")
    if len(found) > 1:
        raise PlatformError(400, f"Several registrations share the issuer {issuer[:200]!r} and the login named no "
                                 "client id; set the LMS to send client_id in its login request.")
    return found[0]


class KeyCache:
    """Platforms' key sets by JWKS URL, fetched over HTTP and kept for `ttl_s` seconds (one per app)."""

    def __init__(self, ttl_s: float, timeout_s: float = 10.0) -> None:
        self.ttl_s = ttl_s
        self.timeout_s = timeout_s
        self._sets: dict[str, tuple[float, KeySet]] = {}
        self._lock = threading.Lock()

    def get(self, platform: LtiPlatform, kid: str | None) -> KeySet:
        """Return the platform's key set, fetched again when it is stale or lacks `kid`."""
        with self._lock:
            cached = self._sets.get(platform.jwks_url)
        if cached and time.monotonic() - cached[0] < self.ttl_s and (kid is None or _has(cached[1], kid)):
            return cached[1]
        keys = fetch_key_set(platform, self.timeout_s)
        with self._lock:
            self._sets[platform.jwks_url] = (time.monotonic(), keys)
        return keys


def _has(keys: KeySet, kid: str) -> bool:
    return any(key.kid == kid for key in keys.keys)


def fetch_key_set(platform: LtiPlatform, timeout_s: float = 10.0) -> KeySet:
    """Fetch a platform's JWK Set; PlatformError 502 saying which URL failed and how."""
    try:
        response = httpx.get(platform.jwks_url, timeout=timeout_s, follow_redirects=True)
        response.raise_for_status()
        return KeySet.import_key_set(response.json())
    except (httpx.HTTPError, ValueError) as exc:
        raise PlatformError(502, f"The keys of {platform.name} could not be fetched from {platform.jwks_url} "
                                 f"({exc.__class__.__name__}: {str(exc)[:200]}), so its launch cannot be checked; try "
                                 "again, and if it goes on, check the platform's JWKS URL (`course lti platforms`)."
                            ) from None
