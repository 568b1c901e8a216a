"""TestOnlyPlatform: an LMS that exists only in the tests.

A real LMS (Canvas, Moodle) cannot run here, so this stands in for one: the platform side of LTI 1.3 over real
HTTP (a uvicorn server on a free port), with its own RSA keys published as a JWKS, an OIDC authorization endpoint
that answers with a signed id_token in an auto-posting form, an OAuth2 token endpoint that checks the tool's
client assertion against the tool's own /lti/jwks, Assignment and Grade Services (line items and scores) and
Names and Role Provisioning (a roster), and a deep-linking return URL that checks the tool's signed response.
`down = True` makes every service answer 503 (an LMS outage). Nothing of it is used by the app.
"""

from __future__ import annotations

import html
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
from fastapi import FastAPI, Form, Request
from fastapi.responses import HTMLResponse, JSONResponse
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

from tests.helpers import LiveServer

LTI = "https://purl.imsglobal.org/spec/lti/claim/"
LEARNER = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"
INSTRUCTOR = "http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"
TEACHING_ASSISTANT = "http://purl.imsglobal.org/vocab/lis/v2/membership/Instructor#TeachingAssistant"
AGS_SCOPES = ["https://purl.imsglobal.org/spec/lti-ags/scope/lineitem",
              "https://purl.imsglobal.org/spec/lti-ags/scope/score"]
NRPS_SCOPE = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"


@dataclass
class Person:
    sub: str
    name: str
    roles: list[str] = field(default_factory=lambda: [LEARNER])
    context: str = "course-101"


class TestOnlyPlatform:
    """The platform side of LTI 1.3, served over HTTP for one test (see the module's docstring)."""

    __test__ = False  # not a test class, whatever its name

    def __init__(self, *, issuer: str = "https://lms.test.invalid", client_id: str = "tool-client-1",
                 deployment: str = "deployment-1", tool_jwks: Callable[[], dict] | None = None) -> None:  # fmt: skip
        self.issuer, self.client_id, self.deployment = issuer, client_id, deployment
        self.key = RSAKey.generate_key(2048, parameters={"kid": secrets.token_hex(4), "alg": "RS256", "use": "sig"})
        self.tool_jwks = tool_jwks  # how the platform reads the tool's public keys (its /lti/jwks)
        self.people: dict[str, Person] = {}
        self.contexts = {"course-101": "Deep Learning 101"}
        self.line_items: dict[str, dict] = {}
        self.scores: list[dict] = []  # every score the tool posted, in order
        self.deep_link_items: list[dict] = []
        self.tokens_issued = 0
        self.down = False
        self.server = LiveServer(self._app())

    # --- lifecycle
    def __enter__(self) -> TestOnlyPlatform:
        self.server.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.server.__exit__(*exc)

    @property
    def url(self) -> str:
        return self.server.url

    def registration(self) -> dict[str, Any]:
        """What `course lti add-platform` is given for this platform."""
        return {"issuer": self.issuer, "client_id": self.client_id, "auth_login_url": f"{self.url}/auth",
                "auth_token_url": f"{self.url}/token", "jwks_url": f"{self.url}/jwks",
                "deployment_ids": [self.deployment]}

    # --- id_tokens
    def id_token(self, person: Person, *, nonce: str, message_type: str = "LtiResourceLinkRequest",
                 target: str = "", key: RSAKey | None = None, **overrides) -> str:  # fmt: skip
        now = int(time.time())
        claims = {
            "iss": self.issuer, "aud": self.client_id, "sub": person.sub, "iat": now, "exp": now + 300,
            "nonce": nonce, "name": person.name,
            LTI + "message_type": message_type, LTI + "version": "1.3.0",
            LTI + "deployment_id": self.deployment, LTI + "target_link_uri": target, LTI + "roles": person.roles,
            LTI + "resource_link": {"id": "link-1"},
            LTI + "context": {"id": person.context, "title": self.contexts.get(person.context, person.context)},
            "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint": {
                "scope": AGS_SCOPES, "lineitems": f"{self.url}/contexts/{person.context}/lineitems"},
            "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice": {
                "context_memberships_url": f"{self.url}/contexts/{person.context}/memberships",
                "service_versions": ["2.0"]},
        }  # fmt: skip
        if message_type == "LtiDeepLinkingRequest":
            claims["https://purl.imsglobal.org/spec/lti-dl/claim/deep_linking_settings"] = {
                "deep_link_return_url": f"{self.url}/deep-link-return", "accept_types": ["ltiResourceLink"],
                "accept_multiple": True, "data": "opaque-platform-data"}
        claims.update(overrides)
        signer = key or self.key
        return jwt.encode({"alg": "RS256", "kid": signer.kid}, claims, signer)

    def authorize(self, location: str) -> tuple[str, dict[str, str]]:
        """Follow the tool's redirect to the authorization endpoint over HTTP; return the form's action and fields
        (what the browser would post to the tool)."""
        page = httpx.get(location)
        assert page.status_code == 200, page.text
        action = html.unescape(re.search(r'action="([^"]+)"', page.text).group(1))
        fields = {name: html.unescape(value) for name, value in
                  re.findall(r'name="([^"]+)" value="([^"]*)"', page.text)}  # fmt: skip
        return action, fields

    # --- the HTTP side
    def _app(self) -> FastAPI:
        app = FastAPI()

        @app.get("/favicon.ico")
        def favicon():  # a browser asks every site for one; a 404 would be a console error in the browser test
            return HTMLResponse("", status_code=204)

        @app.get("/jwks")
        def jwks():
            return {"keys": [self.key.as_dict(private=False)]}

        @app.get("/auth")
        def auth(request: Request):
            query = request.query_params
            assert query["client_id"] == self.client_id and query["response_mode"] == "form_post"
            person = self.people[query["login_hint"]]
            kind, target = (query.get("lti_message_hint") or "LtiResourceLinkRequest|").split("|", 1)
            token = self.id_token(person, nonce=query["nonce"], message_type=kind, target=target)
            fields = {"id_token": token, "state": query["state"]}
            inputs = "".join(f'<input type="hidden" name="{k}" value="{html.escape(v)}">' for k, v in fields.items())
            return HTMLResponse(f'<form method="post" action="{html.escape(query["redirect_uri"])}">{inputs}'
                                '<button>Continue</button></form>')

        @app.post("/token")
        def token(grant_type: str = Form(), client_assertion_type: str = Form(), client_assertion: str = Form(),
                  scope: str = Form("")):  # fmt: skip
            if self.down:
                return JSONResponse({"error": "temporarily_unavailable"}, status_code=503)
            claims = jwt.decode(client_assertion, KeySet.import_key_set(self.tool_jwks()), algorithms=["RS256"]).claims
            assert grant_type == "client_credentials"
            assert client_assertion_type == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
            assert claims["iss"] == claims["sub"] == self.client_id and claims["aud"] == f"{self.url}/token"
            assert claims["exp"] > time.time()
            self.tokens_issued += 1
            return {"access_token": f"token-{self.tokens_issued}", "token_type": "Bearer", "expires_in": 3600,
                    "scope": scope}

        def refused(request: Request):
            if self.down:
                return JSONResponse({"error": "down"}, status_code=503)
            if not request.headers.get("authorization", "").startswith("Bearer token-"):
                return JSONResponse({"error": "no token"}, status_code=401)
            return None

        @app.get("/contexts/{context}/lineitems")
        def lineitems(context: str, request: Request, resource_id: str | None = None):
            if (answer := refused(request)) is not None:
                return answer
            return [item for item in self.line_items.values() if item["context"] == context and
                    (resource_id is None or item.get("resourceId") == resource_id)]

        @app.post("/contexts/{context}/lineitems")
        async def new_lineitem(context: str, request: Request):
            if (answer := refused(request)) is not None:
                return answer
            item = await request.json()
            item_id = f"{self.url}/contexts/{context}/lineitems/{len(self.line_items) + 1}"
            self.line_items[item_id] = {**item, "id": item_id, "context": context}
            return JSONResponse(self.line_items[item_id], status_code=201)

        @app.post("/contexts/{context}/lineitems/{number}/scores")
        async def score(context: str, number: str, request: Request):
            if (answer := refused(request)) is not None:
                return answer
            item_id = f"{self.url}/contexts/{context}/lineitems/{number}"
            assert item_id in self.line_items
            assert request.headers["content-type"].startswith("application/vnd.ims.lis.v1.score+json")
            self.scores.append({**(await request.json()), "lineitem": item_id})
            return JSONResponse({}, status_code=200)

        @app.get("/contexts/{context}/memberships")
        def memberships(context: str, request: Request):
            if (answer := refused(request)) is not None:
                return answer
            members = [{"user_id": p.sub, "name": p.name, "roles": p.roles, "status": "Active"}
                       for p in self.people.values() if p.context == context]
            return {"id": f"{self.url}/contexts/{context}/memberships",
                    "context": {"id": context, "title": self.contexts.get(context, context)}, "members": members}

        @app.post("/deep-link-return")
        def deep_link_return(JWT: str = Form()):  # JWT: the field's name in LTI Deep Linking 2.0
            claims = jwt.decode(JWT, KeySet.import_key_set(self.tool_jwks()), algorithms=["RS256"]).claims
            assert claims["iss"] == self.client_id and claims["aud"] == self.issuer
            assert claims[LTI + "message_type"] == "LtiDeepLinkingResponse"
            assert claims["https://purl.imsglobal.org/spec/lti-dl/claim/data"] == "opaque-platform-data"
            self.deep_link_items.extend(claims["https://purl.imsglobal.org/spec/lti-dl/claim/content_items"])
            return HTMLResponse("<p>Added to the module.</p>")

        return app


def query_of(url: str) -> dict[str, str]:
    return {name: values[0] for name, values in parse_qs(urlsplit(url).query).items()}
