"""Every instructor route refuses learners (403) and visitors (401, or the log-in page for a browser): found by
walking app.routes, so a route added later under /instructor or /api/instructor is covered without touching
this file."""

from __future__ import annotations

import re

import pytest
from fastapi.routing import iter_route_contexts

pytestmark = pytest.mark.small_course  # two small lessons of its own (alpha, beta), not the course

PREFIXES = ("/instructor", "/api/instructor")
KNOWN = {("GET", "/instructor"), ("GET", "/instructor/exercises/{slug}"), ("GET", "/api/instructor/exercises"),
         ("GET", "/api/instructor/progress.csv"), ("POST", "/api/instructor/exercises/{slug}/regrades"),
         ("POST", "/instructor/exercises/{slug}/regrade"), ("GET", "/api/instructor/regrades/{regrade_id}"),
         ("GET", "/instructor/comments"), ("POST", "/instructor/comments/{comment_id}")}  # fmt: skip


def instructor_routes(app) -> list[tuple[str, str]]:
    """(method, path) of every route under the instructor prefixes; HEAD is answered wherever GET is."""
    return sorted((method, route.path) for route in iter_route_contexts(app.routes)
                  if route.path.startswith(PREFIXES) for method in (route.methods or set()) - {"HEAD"})


def concrete(path: str) -> str:
    """Fill the path's parameters with values a route could be asked for (a lesson slug, a small id)."""
    return re.sub(r"\{[^}]+\}", lambda m: "alpha" if m.group(0) == "{slug}" else "1", path)


def request_kinds(method: str) -> list[dict]:
    """A script's request (JSON) and a browser's (a page, or a form post)."""
    if method == "GET":
        return [{"headers": {"accept": "application/json"}}, {"headers": {"accept": "text/html,*/*"}}]
    return [{"json": {}}, {"data": {"action": "show", "since": ""}}]


def test_the_walk_finds_every_instructor_route(app):
    assert KNOWN <= set(instructor_routes(app))


def test_a_learner_gets_403_on_every_instructor_route(app, signed_in_client):
    learner = signed_in_client("leo@example.org", name="Leo")
    for method, path in instructor_routes(app):
        for kwargs in request_kinds(method):
            response = learner.request(method, concrete(path), follow_redirects=False, **kwargs)
            assert response.status_code == 403, (method, path, kwargs, response.status_code, response.text[:200])
            if "text/html" in kwargs.get("headers", {}).get("accept", ""):
                assert "<h1>Access denied</h1>" in response.text and "leo@example.org, a learner" in response.text
            else:
                assert "for instructors only" in response.json()["detail"]


# what a teaching assistant may open (app/web/routes/classroom.py); the rest is the instructor's alone
FOR_TAS = {("GET", "/instructor/learners"), ("GET", "/instructor/learners/{learner_id}"),
           ("GET", "/api/instructor/learners"), ("GET", "/api/instructor/learners/{learner_id}"),
           ("GET", "/api/instructor/code.zip")}


def test_a_teaching_assistant_gets_403_on_every_instructor_route_but_the_class_s(app, signed_in_client):
    assert FOR_TAS <= set(instructor_routes(app))
    tess = signed_in_client("tess@example.org", name="Tess", role="ta")
    for method, path in instructor_routes(app):
        if (method, path) in FOR_TAS:
            continue
        for kwargs in request_kinds(method):
            response = tess.request(method, concrete(path), follow_redirects=False, **kwargs)
            assert response.status_code == 403, (method, path, kwargs, response.status_code, response.text[:200])
    assert tess.get("/api/instructor/learners").json() == []  # in no section yet: nobody to see
    assert tess.get("/api/instructor/learners/1", headers={"accept": "application/json"}).status_code == 403


def test_a_visitor_gets_401_or_the_log_in_page_on_every_instructor_route(app, client):
    for method, path in instructor_routes(app):
        for kwargs in request_kinds(method):
            response = client.request(method, concrete(path), follow_redirects=False, **kwargs)
            if response.status_code == 303:
                assert method == "GET" and response.headers["location"] == \
                    f"/login?next={concrete(path).replace('/', '%2F')}", (method, path)
            else:
                assert response.status_code == 401, (method, path, kwargs, response.status_code)
                assert "Sign in as an instructor" in response.json()["detail"]


def test_an_instructor_gets_the_pages(instructor_client, html_headers):
    for path in ("/instructor", "/instructor/comments", "/api/instructor/exercises", "/api/instructor/progress.csv"):
        assert instructor_client.get(path, headers=html_headers).status_code == 200, path
    assert instructor_client.get("/api/instructor/regrades/7").status_code == 404
    assert instructor_client.get("/instructor/exercises/nope").status_code == 404


def test_the_log_in_page_brings_an_instructor_back(app, client, html_headers):
    from tests.helpers import TEST_PASSWORD, create_account

    create_account(app, "ines@example.org", name="Ines", role="instructor")
    sent = client.get("/instructor/comments", headers=html_headers, follow_redirects=False)
    assert sent.headers["location"] == "/login?next=%2Finstructor%2Fcomments"
    back = client.post("/login", data={"email": "ines@example.org", "password": TEST_PASSWORD,
                                       "next": "/instructor/comments", "csrf_token": client.headers["X-CSRF-Token"]},
                       follow_redirects=False)  # fmt: skip
    assert back.status_code == 303 and back.headers["location"] == "/instructor/comments"
    assert client.get("/instructor/comments", headers=html_headers).status_code == 200
