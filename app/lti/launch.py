"""OIDC third-party login and the LTI 1.3 launch (IMS Security Framework 1.0, section 5.1.1; LTI Core 1.3).

1. The LMS sends the browser to /lti/login with its issuer and a login hint. `begin_login` finds the registered
   platform, stores a one-use state and nonce, and answers where the browser goes next: the platform's
   authorization endpoint, asking for an id_token posted back to /lti/launch.
2. The platform posts the id_token (a JWT it signed) and the state to /lti/launch. `complete_launch` takes the
   state once (a second use is a replay), checks the token's signature against the platform's JWKS, its issuer,
   audience, expiry, nonce (the one stored with the state), LTI version, message type and deployment id, then
   signs the person in as the account linked to (platform, sub), made on their first launch, and records the LMS
   course (context) with its grade and roster service URLs and the person's roles there.

Every refusal is a `LaunchRefused`: a 4xx and a sentence saying what was wrong and who can fix it.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode, urlsplit

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jws import extract_compact
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.accounts import users as accounts
from app.core import security
from app.core.errors import Refusal
from app.learning import sections
from app.lti.platforms import KeyCache, find
from app.models import ROLES, User
from app.models.lti import LtiContext, LtiIdentity, LtiLogin, LtiMember, LtiPlatform

LTI = "https://purl.imsglobal.org/spec/lti/claim/"
MESSAGE_TYPE = LTI + "message_type"
VERSION = LTI + "version"
DEPLOYMENT_ID = LTI + "deployment_id"
TARGET_LINK_URI = LTI + "target_link_uri"
RESOURCE_LINK = LTI + "resource_link"
ROLES_CLAIM = LTI + "roles"
CONTEXT = LTI + "context"
AGS_ENDPOINT = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
NRPS = "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"
DEEP_LINKING_SETTINGS = "https://purl.imsglobal.org/spec/lti-dl/claim/deep_linking_settings"
RESOURCE_LINK_REQUEST = "LtiResourceLinkRequest"
DEEP_LINKING_REQUEST = "LtiDeepLinkingRequest"

MEMBERSHIP = "http://purl.imsglobal.org/vocab/lis/v2/membership#"
# LTI roles that make an instructor of the course: the LMS course's teachers, designers and administrators
INSTRUCTOR_ROLES = frozenset({MEMBERSHIP + "Instructor", MEMBERSHIP + "ContentDeveloper", MEMBERSHIP + "Administrator",
                              "http://purl.imsglobal.org/vocab/lis/v2/institution/person#Administrator"})
# a sub-role of Instructor: LMSs send it (often beside #Instructor) for teaching assistants
TEACHING_ASSISTANT = "http://purl.imsglobal.org/vocab/lis/v2/membership/Instructor#TeachingAssistant"
# the site's roles, least to most powerful: a launch raises an account's role, never lowers it
RANK = ("learner", "ta", "instructor")

# seconds a login may take between /lti/login and /lti/launch (the person may have to sign in to the LMS)
LOGIN_TTL_S = 600
# seconds of clock difference between the platform and the course that a token's iat and exp may carry
LEEWAY_S = 60


class LaunchRefused(Refusal):
    """A login or launch the course refuses: its status and a sentence saying what was wrong."""


@dataclass(frozen=True)
class Launch:
    """A checked launch: who is signed in, and where they go (or the deep-linking request they answer)."""

    user: User
    platform: LtiPlatform
    context: LtiContext | None
    target: str  # a path of this site
    deep_linking: dict[str, Any] | None  # LtiDeepLinkingRequest: what the response needs (return URL, data, ...)


# --- 1. login ------------------------------------------------------------------------------------------------


def begin_login(session: Session, *, params: dict[str, str], launch_url: str, site_url: str) -> str:
    """Store a one-use state and nonce for an OIDC login initiation; return the platform URL to send the browser to.

    `params` are the login request's fields (query or form): iss, login_hint, target_link_uri, and optionally
    client_id, lti_message_hint, lti_deployment_id.
    """
    missing = [name for name in ("iss", "login_hint", "target_link_uri") if not params.get(name)]
    if missing:
        raise LaunchRefused(400, f"This LTI login lacks {', '.join(missing)}: start it from a link in the LMS, not "
                                 "by opening /lti/login yourself.")
    if not _ours(params["target_link_uri"], site_url):
        raise LaunchRefused(400, f"The LMS asked to open {params['target_link_uri'][:200]!r}, which is not on this "
                                 f"site ({site_url}); fix the tool's target link URI in the LMS.")
    platform = find(session, issuer=params["iss"], client_id=params.get("client_id"))
    login = LtiLogin(state=secrets.token_urlsafe(32), nonce=secrets.token_urlsafe(32), platform_id=platform.id)
    session.add(login)
    query = {"scope": "openid", "response_type": "id_token", "response_mode": "form_post", "prompt": "none",
             "client_id": platform.client_id, "redirect_uri": launch_url, "login_hint": params["login_hint"],
             "state": login.state, "nonce": login.nonce}  # fmt: skip
    if params.get("lti_message_hint"):
        query["lti_message_hint"] = params["lti_message_hint"]
    separator = "&" if "?" in platform.auth_login_url else "?"
    return f"{platform.auth_login_url}{separator}{urlencode(query)}"


def _ours(url: str, site_url: str) -> bool:
    site, target = urlsplit(site_url), urlsplit(url)
    return (target.scheme, target.netloc) == (site.scheme, site.netloc)


# --- 2. launch -----------------------------------------------------------------------------------------------


def complete_launch(session: Session, *, id_token: str, state: str, keys: KeyCache, site_url: str,
                    now: datetime) -> Launch:  # fmt: skip
    """Check a launch (see the module's docstring) and sign its person in; the caller commits and sets the cookie."""
    login = session.get(LtiLogin, state) if state else None
    if login is None:
        raise LaunchRefused(400, "This launch answers no login this course started (unknown state): open the "
                                 "activity again from the LMS.")
    if login.used_at is not None:
        raise LaunchRefused(400, "This launch was used already (its state and nonce are good once): open the "
                                 "activity again from the LMS.")
    login.used_at = now  # one use: with the launch's commit; a refused launch leaves it unused (nothing signed in)
    if now - login.created_at > timedelta(seconds=LOGIN_TTL_S):
        raise LaunchRefused(400, f"This launch took longer than {LOGIN_TTL_S // 60} minutes after its login: open "
                                 "the activity again from the LMS.")
    platform = session.get(LtiPlatform, login.platform_id)
    claims = verify_id_token(id_token, platform=platform, keys=keys, nonce=login.nonce, now=now)
    deployment = claims.get(DEPLOYMENT_ID)
    if deployment not in platform.deployment_ids:
        raise LaunchRefused(403, f"Deployment {str(deployment)[:100]!r} of {platform.name} is not registered with "
                                 "this course; its administrator adds it with `course lti add-platform "
                                 f"{platform.name} ... --deployment {str(deployment)[:100]}`.")
    kind = claims.get(MESSAGE_TYPE)
    if kind not in (RESOURCE_LINK_REQUEST, DEEP_LINKING_REQUEST):
        raise LaunchRefused(400, f"This course does not handle LTI messages of type {str(kind)[:100]!r}; it takes "
                                 f"{RESOURCE_LINK_REQUEST} and {DEEP_LINKING_REQUEST}.")
    roles = [role for role in claims.get(ROLES_CLAIM) or [] if isinstance(role, str)]
    user = _account(session, platform, claims, roles)
    context = _context(session, platform, claims, deployment)
    if context is not None:
        member_of(session, context, user, roles)
        place(session, context, user, roles)
    deep_linking = None
    if kind == DEEP_LINKING_REQUEST:
        if role_for(roles) != "instructor":
            raise LaunchRefused(403, "Only the LMS course's instructors may add the course's lessons and exercises "
                                     "to it.")
        settings = claims.get(DEEP_LINKING_SETTINGS) or {}
        if not settings.get("deep_link_return_url"):
            raise LaunchRefused(400, "This deep-linking request has no deep_link_return_url to answer to.")
        deep_linking = {"platform_id": platform.id, "deployment_id": deployment,
                        "return_url": settings["deep_link_return_url"], "data": settings.get("data"),
                        "accept_multiple": settings.get("accept_multiple", True)}  # fmt: skip
        target = "/lti/deep-link"
    else:
        target_url = claims.get(TARGET_LINK_URI) or ""
        target = _path(target_url) if _ours(target_url, site_url) else "/"
    return Launch(user=user, platform=platform, context=context, target=target, deep_linking=deep_linking)


def verify_id_token(id_token: str, *, platform: LtiPlatform, keys: KeyCache, nonce: str,
                    now: datetime) -> dict[str, Any]:  # fmt: skip
    """Return the id_token's claims once its signature, issuer, audience, times, nonce and version are good."""
    try:
        header = extract_compact(id_token.encode()).protected
    except (JoseError, ValueError, UnicodeError):
        raise LaunchRefused(400, "The launch's id_token is not a JWT.") from None
    key_set = keys.get(platform, header.get("kid"))
    try:
        claims = jwt.decode(id_token, key_set, algorithms=["RS256"]).claims
    except JoseError as exc:
        raise LaunchRefused(401, f"The launch's id_token is not signed by a key of {platform.name} (its JWKS at "
                                 f"{platform.jwks_url}): {exc.__class__.__name__}. If the LMS rotated its keys, "
                                 "open the activity again; otherwise check the registered JWKS URL.") from None
    stamp = now.timestamp()
    if claims.get("iss") != platform.issuer:
        raise LaunchRefused(401, f"The id_token's issuer {str(claims.get('iss'))[:200]!r} is not {platform.name}'s "
                                 f"({platform.issuer}).")
    audience = claims.get("aud")
    audiences = audience if isinstance(audience, list) else [audience]
    if platform.client_id not in audiences or (len(audiences) > 1 and claims.get("azp") != platform.client_id):
        raise LaunchRefused(401, f"The id_token is meant for another tool (audience {audience!r}), not this "
                                 f"course's client id {platform.client_id!r} at {platform.name}.")
    if not isinstance(claims.get("exp"), int | float) or claims["exp"] + LEEWAY_S < stamp:
        raise LaunchRefused(401, "The launch's id_token has expired: open the activity again from the LMS (if it "
                                 "keeps happening, the LMS's clock or this server's is wrong).")
    if not isinstance(claims.get("iat"), int | float) or claims["iat"] - LEEWAY_S > stamp:
        raise LaunchRefused(401, "The launch's id_token is dated in the future: this server's clock or the LMS's "
                                 "is wrong.")
    if not secrets.compare_digest(str(claims.get("nonce", "")), nonce):
        raise LaunchRefused(401, "The launch's id_token carries another login's nonce (a replayed token): open the "
                                 "activity again from the LMS.")
    if claims.get(VERSION) != "1.3.0":
        raise LaunchRefused(400, f"This course speaks LTI 1.3.0; the launch says {str(claims.get(VERSION))[:20]!r}.")
    if not claims.get("sub"):
        raise LaunchRefused(400, "The launch names nobody (no sub): anonymous launches are not supported.")
    return claims


def _path(url: str) -> str:
    parts = urlsplit(url)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "") + \
        (f"#{parts.fragment}" if parts.fragment else "")


def role_for(roles: list[str]) -> str:
    """The site's role for a person with these LTI roles: instructor, ta (the TeachingAssistant sub-role, where
    the site has that role; a learner otherwise) or learner."""
    if TEACHING_ASSISTANT in roles:
        return "ta" if "ta" in ROLES else "learner"
    if INSTRUCTOR_ROLES.intersection(roles):
        return "instructor"
    return "learner"


def _raise_role(user: User, role: str) -> None:
    if RANK.index(role) > RANK.index(user.role if user.role in RANK else "learner"):
        user.role = role


def account_for(session: Session, platform: LtiPlatform, sub: str, *, name: str, roles: list[str]) -> User:
    """Return the account an LMS person signs in as, made on first sight (a launch or the roster).

    It is never matched to an existing account by the email the LMS gives: any registered LMS could then take
    over any account by claiming its email. Its email is a made-up one under .invalid (RFC 2606), its password
    random and never shown: the person signs in through the LMS.
    """
    identity = session.scalar(select(LtiIdentity).where(LtiIdentity.platform_id == platform.id,
                                                        LtiIdentity.sub == sub))
    if identity is not None:
        user = session.get(User, identity.user_id)
    else:
        digest = hashlib.sha256(f"{platform.id}:{sub}".encode()).hexdigest()[:24]
        user = accounts.create_user(session, email=f"lti-{platform.id}-{digest}@lms.invalid",
                                    password=security.new_csrf_token(), display_name=(name or "LMS learner")[:80])
        session.add(LtiIdentity(platform_id=platform.id, sub=sub, user_id=user.id))
        session.flush()
    _raise_role(user, role_for(roles))
    return user


def _account(session: Session, platform: LtiPlatform, claims: dict[str, Any], roles: list[str]) -> User:
    name = claims.get("name") or " ".join(filter(None, [claims.get("given_name"), claims.get("family_name")]))
    return account_for(session, platform, str(claims["sub"]), name=str(name or ""), roles=roles)


def _context(session: Session, platform: LtiPlatform, claims: dict[str, Any], deployment: str) -> LtiContext | None:
    about = claims.get(CONTEXT) or {}
    if not about.get("id"):
        return None
    context = session.scalar(select(LtiContext).where(LtiContext.platform_id == platform.id,
                                                      LtiContext.context_id == str(about["id"])))
    if context is None:
        context = LtiContext(platform_id=platform.id, context_id=str(about["id"]), ags_scopes=[])
        session.add(context)
    context.deployment_id = deployment
    context.title = str(about.get("title") or about.get("label") or context.title or "")[:255]
    ags = claims.get(AGS_ENDPOINT) or {}
    if ags.get("lineitems"):
        context.lineitems_url, context.ags_scopes = ags["lineitems"], list(ags.get("scope") or [])
    nrps = claims.get(NRPS) or {}
    if nrps.get("context_memberships_url"):
        context.memberships_url = nrps["context_memberships_url"]
    session.flush()
    return context


def member_of(session: Session, context: LtiContext, user: User, roles: list[str]) -> LtiMember:
    """Record (or update) a person's membership and roles in an LMS course."""
    member = session.scalar(select(LtiMember).where(LtiMember.context_id == context.id,
                                                    LtiMember.user_id == user.id))
    if member is None:
        member = LtiMember(context_id=context.id, user_id=user.id, learner_id=user.learner_id)
        session.add(member)
    member.roles = roles
    session.flush()
    return member



def section_name(context: LtiContext) -> str:
    """The course's section for an LMS course (app/lti/roster.py): its title (its id when it has none)."""
    return (context.title or context.context_id)[:100]


def place(session: Session, context: LtiContext, user: User, roles: list[str]) -> None:
    """Put a person in their LMS course's section as a learner or a TA (instructors see every section)."""
    role = role_for(roles)
    if role in ("learner", "ta"):
        sections.add_member(session, section_name(context), user.learner_id, role=role)
