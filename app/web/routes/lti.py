"""LTI 1.3: the OIDC login, the launch, the tool's key set, and the deep-linking picker (app/lti/ does the work).

/lti/login and /lti/launch are requests the LMS makes the browser send from another site, so they carry no CSRF
token of ours: the launch is checked by its one-use state and nonce and by the platform's signature on its
id_token instead (docs/security.md#lti-launches).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import JSONResponse, RedirectResponse

from app.lti import deep_linking, keys
from app.lti.launch import LaunchRefused, begin_login, complete_launch
from app.lti.platforms import KeyCache
from app.models import utcnow
from app.web.deps import CourseDep, InstructorUser, SessionDep
from app.web.middleware.identity import sign_in
from app.web.templating import render

router = APIRouter(tags=["lti"])


def key_cache(request: Request) -> KeyCache:
    """The app's cache of platforms' key sets (made on first use)."""
    state = request.app.state
    if getattr(state, "lti_keys", None) is None:
        settings = state.settings
        state.lti_keys = KeyCache(settings.lti_jwks_cache_s, settings.lti_http_timeout_s)
    return state.lti_keys


async def _params(request: Request) -> dict[str, str]:
    fields = dict(request.query_params)
    if request.method == "POST":
        fields.update({k: v for k, v in (await request.form()).items() if isinstance(v, str)})
    return fields


@router.api_route("/lti/login", methods=["GET", "POST"], include_in_schema=False)
async def login(request: Request, session: SessionDep):
    """OIDC third-party login initiation: send the browser to the platform's authorization endpoint."""
    params = await _params(request)
    settings = request.app.state.settings
    url = begin_login(session, params=params, launch_url=settings.site_url() + "/lti/launch",
                      site_url=settings.site_url())
    session.commit()
    return RedirectResponse(url, status_code=302)


@router.post("/lti/launch", include_in_schema=False)
def launch(request: Request, session: SessionDep, id_token: Annotated[str, Form()] = "",
           state: Annotated[str, Form()] = ""):  # fmt: skip
    """The platform's id_token, posted by the browser: check it, sign the person in, open what they launched."""
    settings = request.app.state.settings
    done = complete_launch(session, id_token=id_token, state=state, keys=key_cache(request),
                           site_url=settings.site_url(), now=utcnow())
    sign_in(request, done.user, session=session)
    session.commit()
    if done.deep_linking is not None:
        request.session["lti_dl"] = done.deep_linking
    return RedirectResponse(done.target, status_code=303)


@router.get("/lti/jwks")
def jwks(session: SessionDep) -> JSONResponse:
    """The tool's public keys (a JWK Set): platforms check the course's signatures against them."""
    return JSONResponse(keys.public_jwks(session), headers={"Cache-Control": "max-age=300"})


def _deep_linking(request: Request) -> dict:
    found = request.session.get("lti_dl")
    if not isinstance(found, dict):
        raise LaunchRefused(400, "There is no LMS waiting for a choice: open the picker from the LMS (add an "
                                 "external tool item to a module) and choose there.")
    return found


@router.get("/lti/deep-link", include_in_schema=False)
def picker(request: Request, user: InstructorUser, course: CourseDep):
    """The picker an LMS instructor chooses lessons and exercises from."""
    waiting = _deep_linking(request)
    return render(request, "lti/picker.html", choices=deep_linking.choices(course),
                  multiple=waiting.get("accept_multiple", True) is not False)


@router.post("/lti/deep-link", include_in_schema=False)
async def picked(request: Request, user: InstructorUser, course: CourseDep, session: SessionDep):
    """Answer the LMS with the chosen items: a page whose form posts the signed response to the LMS."""
    waiting = _deep_linking(request)
    chosen = set((await request.form()).getlist("item"))
    picked = [choice for choice in deep_linking.choices(course) if f"{choice.kind}:{choice.slug}" in chosen]
    if not picked:
        return render(request, "lti/picker.html", status_code=400, choices=deep_linking.choices(course),
                      multiple=waiting.get("accept_multiple", True) is not False,
                      error="Choose at least one lesson or exercise.")
    if waiting.get("accept_multiple", True) is False:
        picked = picked[:1]
    token = deep_linking.response_jwt(session, request=waiting, picked=picked,
                                      site_url=request.app.state.settings.site_url())
    session.commit()
    request.session.pop("lti_dl", None)  # answered: a second answer would add the items twice
    # this page's form goes to the LMS: the one origin the CSP's form-action adds (docs/security.md#lti-launches)
    request.state.form_action = deep_linking.origin(waiting["return_url"])
    return render(request, "lti/return.html", return_url=waiting["return_url"], jwt=token, picked=picked)
