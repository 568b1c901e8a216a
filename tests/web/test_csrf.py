"""Every state-changing route refuses a request without this session's CSRF token: found by walking app.routes,
so routes added later (by any area) are covered without touching this file."""

from __future__ import annotations

import re

import pytest
from fastapi.routing import iter_route_contexts

from app.web.deps import CSRF_EXEMPT_PATHS

pytestmark = pytest.mark.small_course  # two small lessons of its own (alpha, beta), not the course

UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}


def unsafe_routes(app) -> list[tuple[str, str]]:
    found = []
    for route in iter_route_contexts(app.routes):  # FastAPI keeps included routers nested; this flattens them
        for method in sorted((route.methods or set()) & UNSAFE):
            found.append((method, re.sub(r"\{[^}]+\}", "1", route.path)))
    return found


def test_the_walk_finds_the_accounts_routes(app):
    routes = unsafe_routes(app)
    for expected in [("POST", "/api/auth/login"), ("POST", "/api/lessons/1/comments"), ("DELETE", "/api/comments/1"),
                     ("PATCH", "/api/comments/1"), ("POST", "/api/lessons/1/read"), ("POST", "/logout"),
                     ("POST", "/api/account/profile"), ("POST", "/api/account/password"),
                     ("POST", "/api/account/logout-all"), ("DELETE", "/api/account"), ("POST", "/account/profile"),
                     ("POST", "/account/password"), ("POST", "/account/logout-all"), ("POST", "/account/delete"),
                     ("POST", "/forgot"), ("POST", "/reset/1")]:  # fmt: skip
        assert expected in routes


@pytest.mark.parametrize("token", [None, "", "forged-token"])
def test_every_unsafe_route_refuses_a_missing_or_wrong_token(app, signed_in_client, token):
    browser = signed_in_client()  # signed in, so a 403 here is CSRF, not "who are you"
    real = browser.headers.pop("X-CSRF-Token")
    assert real != token
    headers = {} if token is None else {"X-CSRF-Token": token}
    for method, path in unsafe_routes(app):
        if path in CSRF_EXEMPT_PATHS:  # the LMS's cross-site posts: tests/lti checks what guards them instead
            continue
        for kwargs in ({"json": {}}, {"data": {"csrf_token": token or ""}}):
            response = browser.request(method, path, headers=headers, **kwargs)
            assert response.status_code == 403, (method, path, kwargs, response.status_code, response.text)
            assert "CSRF" in response.json()["detail"]


def test_only_the_lms_cross_site_posts_go_without_a_token():
    # each one is checked another way (docs/security.md#lti-launches); a new exemption needs its own reason there
    assert CSRF_EXEMPT_PATHS == {"/lti/login", "/lti/launch"}


def test_another_sessions_token_is_refused(client, make_client):
    other = make_client()
    response = client.post("/api/lessons/alpha/read", headers={"X-CSRF-Token": other.headers["X-CSRF-Token"]})
    assert response.status_code == 403


def test_the_token_works_as_header_and_as_form_field(client):
    assert client.post("/api/lessons/alpha/read").status_code == 200
    token = client.headers.pop("X-CSRF-Token")
    response = client.post("/lessons/beta/read", data={"csrf_token": token}, follow_redirects=False)
    assert response.status_code == 303
    assert set(client.get("/api/progress").json()["lessons"]) == {"alpha", "beta"}


def test_safe_methods_need_no_token(client):
    client.headers.pop("X-CSRF-Token")
    assert client.get("/api/progress").status_code == 200
    assert client.get("/api/lessons/alpha/comments").status_code == 200
