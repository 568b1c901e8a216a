"""LTI Advantage services over HTTP: the OAuth2 token (client credentials with a signed JWT assertion, IMS Security
Framework 4.1), Assignment and Grade Services 2.0 (line items, scores) and Names and Role Provisioning 2.0.

Everything here waits on the network: it is called by the grade sender and `course lti`, never in a request's
or a verdict's transaction. A failure is an `LmsError` saying which LMS, which URL and what it answered.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx
from joserfc import jwt
from joserfc.jwk import RSAKey

from app.models.lti import LtiPlatform

LINEITEM = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
SCORE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
MEMBERSHIPS = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"
LINEITEM_TYPE = "application/vnd.ims.lis.v2.lineitem+json"
LINEITEMS_TYPE = "application/vnd.ims.lis.v2.lineitemcontainer+json"
SCORE_TYPE = "application/vnd.ims.lis.v1.score+json"
MEMBERSHIPS_TYPE = "application/vnd.ims.lti-nrps.v2.membershipcontainer+json"
# seconds before a token's end at which it is not used any more (a request in flight must not outlive it)
TOKEN_MARGIN_S = 30


class LmsError(Exception):
    """An LMS did not do what the course asked: which one, which URL, what it answered."""


@dataclass(frozen=True)
class Platform:
    """What a request to an LMS needs of its registration (a plain copy: no database session held)."""

    id: int
    name: str
    client_id: str
    token_url: str

    @classmethod
    def of(cls, row: LtiPlatform) -> Platform:
        return cls(id=row.id, name=row.name, client_id=row.client_id, token_url=row.auth_token_url)


_tokens: dict[tuple[int, str], tuple[float, str]] = {}
_tokens_lock = threading.Lock()


def access_token(platform: Platform, scopes: list[str], key: RSAKey, timeout_s: float) -> str:
    """Return a bearer token for `scopes` at the platform, kept until shortly before it expires."""
    scope = " ".join(sorted(scopes))
    with _tokens_lock:
        cached = _tokens.get((platform.id, scope))
    if cached and cached[0] > time.monotonic():
        return cached[1]
    now = int(time.time())
    assertion = jwt.encode({"alg": "RS256", "kid": key.kid},
                           {"iss": platform.client_id, "sub": platform.client_id, "aud": platform.token_url,
                            "iat": now, "exp": now + 300, "jti": secrets.token_urlsafe(16)}, key)  # fmt: skip
    answer = _request(platform, "POST", platform.token_url, timeout_s, data={
        "grant_type": "client_credentials", "scope": scope, "client_assertion": assertion,
        "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"})
    token = answer.get("access_token")
    if not isinstance(token, str):
        raise LmsError(f"{platform.name}'s token endpoint {platform.token_url} answered no access_token")
    lifetime = float(answer.get("expires_in") or 3600)
    with _tokens_lock:
        _tokens[(platform.id, scope)] = (time.monotonic() + lifetime - TOKEN_MARGIN_S, token)
    return token


def forget_tokens() -> None:
    """Drop every kept token (a test's platform is new each time)."""
    with _tokens_lock:
        _tokens.clear()


def _request(platform: Platform, method: str, url: str, timeout_s: float, *, token: str | None = None,
             accept: str = "application/json", **kwargs) -> Any:  # fmt: skip
    headers = {"Accept": accept, **kwargs.pop("headers", {})}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        response = httpx.request(method, url, headers=headers, timeout=timeout_s, **kwargs)
    except httpx.HTTPError as exc:
        raise LmsError(f"{platform.name} did not answer {method} {url}: {exc.__class__.__name__}: "
                       f"{str(exc)[:200]}") from None
    if response.status_code >= 400:
        raise LmsError(f"{platform.name} answered {response.status_code} to {method} {url}: "
                       f"{response.text[:300]}")
    if not response.content:
        return {}
    try:
        return response.json()
    except ValueError:
        raise LmsError(f"{platform.name} answered {method} {url} with something that is not JSON") from None


def find_line_item(platform: Platform, token: str, lineitems_url: str, resource_id: str,
                   timeout_s: float) -> str | None:  # fmt: skip
    """Return the URL of the context's line item for `resource_id` the LMS already has, or None."""
    separator = "&" if "?" in lineitems_url else "?"
    items = _request(platform, "GET", f"{lineitems_url}{separator}resource_id={resource_id}", timeout_s,
                     token=token, accept=LINEITEMS_TYPE)
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get("resourceId") == resource_id and item.get("id"):
            return item["id"]
    return None


def create_line_item(platform: Platform, token: str, lineitems_url: str, *, resource_id: str, label: str,
                     maximum: float, timeout_s: float) -> str:  # fmt: skip
    """Create a line item (a gradebook column) and return its URL."""
    item = _request(platform, "POST", lineitems_url, timeout_s, token=token, accept=LINEITEM_TYPE,
                    json={"scoreMaximum": maximum, "label": label, "resourceId": resource_id, "tag": "exercise"},
                    headers={"Content-Type": LINEITEM_TYPE})
    if not isinstance(item, dict) or not item.get("id"):
        raise LmsError(f"{platform.name} created a line item at {lineitems_url} but gave no id for it")
    return item["id"]


def post_score(platform: Platform, token: str, lineitem_url: str, score: dict[str, Any], timeout_s: float) -> None:
    """Post one score to a line item (AGS: POST {lineitem}/scores)."""
    base, _, query = lineitem_url.partition("?")
    url = f"{base.rstrip('/')}/scores" + (f"?{query}" if query else "")
    _request(platform, "POST", url, timeout_s, token=token, content=_json(score),
             headers={"Content-Type": SCORE_TYPE})


def memberships(platform: Platform, token: str, url: str, timeout_s: float) -> list[dict[str, Any]]:
    """Return every member of a context (NRPS), following the `rel="next"` links of a paged roster."""
    members: list[dict[str, Any]] = []
    pages = 0
    while url and pages < 1000:
        pages += 1
        try:
            response = httpx.get(url, headers={"Accept": MEMBERSHIPS_TYPE, "Authorization": f"Bearer {token}"},
                                 timeout=timeout_s)
        except httpx.HTTPError as exc:
            raise LmsError(f"{platform.name} did not answer GET {url}: {exc.__class__.__name__}") from None
        if response.status_code >= 400:
            raise LmsError(f"{platform.name} answered {response.status_code} to GET {url}: {response.text[:300]}")
        members.extend(member for member in response.json().get("members", []) if isinstance(member, dict))
        url = response.links.get("next", {}).get("url")
    return members


def _json(value: Any) -> bytes:
    import json

    return json.dumps(value).encode()
