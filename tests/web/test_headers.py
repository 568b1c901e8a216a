"""Security headers on every response, and HEAD answered like GET without a body: every GET route of app.routes
is requested with slugs, ids and tokens that exist, so each answers as it does for a person (not a 404)."""

from __future__ import annotations

import re

import pytest
from fastapi.routing import iter_route_contexts

from app.accounts import password_reset
from app.learning import progress
from app.models import Regrade, User
from app.submissions.finish import error_verdict, finish
from app.web.middleware.headers import CSP, DOCS_CSP, HEADERS, HSTS_MAX_AGE_S, SVG_CSP
from tests.helpers import make_settings

PARAMETER = re.compile(r"\{([^}]+)\}")


def get_routes(app) -> list[str]:
    """Every path the app routes GET on (the JSON API, pages, forms' pages, the API explorers)."""
    return sorted({route.path for route in iter_route_contexts(app.routes) if "GET" in (route.methods or set())})


@pytest.fixture
def visitor(app, signed_in_client):
    """A signed-in instructor (every route answers them) with a finished submission, a reset link, a regrade and a
    lesson block's run;
    `.values` fills each path parameter."""
    browser = signed_in_client(role="instructor")
    lesson = app.state.course.lessons[0].slug
    exercise = sorted(app.state.course.exercises)[0]
    with app.state.db.session(write=True) as session:
        user = session.get(User, browser.user["id"])
        sub = progress.record_submission(session, learner_id=user.learner_id, exercise_slug=exercise, code="print(1)")
        finish(session, submission_id=sub.id, verdict=error_verdict(exercise, "seeded"))
        token = password_reset.issue_token(session, user=user, ttl_s=600)
        regrade = Regrade(exercise_slug=exercise, requested_by=user.id, status="finished")
        session.add(regrade)
        session.commit()
        browser.values = {"submission_id": sub.id, "token": token, "lesson": lesson, "exercise": exercise,
                          "learner_id": user.learner_id,
                          "regrade_id": str(regrade.id)}
    run = browser.post(f"/api/lessons/{lesson}/blocks/1/runs", json={})  # a lesson block's run, in the sandbox
    assert run.status_code == 202, run.text
    browser.values["run_id"] = run.json()["id"]
    return browser


def real_path(path: str, values: dict[str, str]) -> str:
    """Put values that exist into a route's path parameters; fail for a parameter this test does not know yet."""
    def value(match: re.Match) -> str:
        name = match.group(1)
        if name == "slug":
            exercise_routes = ("/api/exercises/", "/instructor/exercises/", "/exercises/")
            return values["exercise" if path.startswith(exercise_routes) else "lesson"]
        if name not in values:
            pytest.fail(f"{path}: give the parameter {{{name}}} a value that exists in the `visitor` fixture")
        return values[name]

    return PARAMETER.sub(value, path)


def expected_csp(path: str, header: str) -> str:
    if path in ("/docs", "/redoc"):
        return DOCS_CSP
    nonce = re.search(r"'nonce-([^']+)'", header)
    assert nonce, f"{path}: no nonce in {header}"
    return CSP.format(nonce=nonce.group(1))


def assert_security_headers(response, path: str, production: bool = False) -> None:
    csp = response.headers.get("content-security-policy", "")
    assert csp == expected_csp(path, csp), path
    for name, value in HEADERS.items():
        assert response.headers.get(name) == value, (path, name)
    assert ("strict-transport-security" in response.headers) == production, path


def test_the_walk_covers_pages_api_and_the_new_routes(app):
    routes = get_routes(app)
    for path in ("/", "/lessons/{slug}", "/healthz", "/account", "/api/account/export", "/forgot", "/reset/{token}",
                 "/api/submissions/{submission_id}/events", "/docs", "/redoc", "/openapi.json"):  # fmt: skip
        assert path in routes


# GET routes only an LMS's launch makes answer 200 or 302 (tests/lti drives them with one): here their refusal,
# which carries the same headers
# routes that answer the visitor with a refusal, which must carry the headers too: the LTI doors need an LMS, and
# the seeded submission ran on no simulated GPU, so it has no timeline to download
NOT_200 = {"/lti/login": 400, "/lti/deep-link": 400, "/api/submissions/{submission_id}/trace": 404}


def test_every_get_route_answers_with_the_security_headers(app, visitor):
    for route in get_routes(app):
        path = real_path(route, visitor.values)
        response = visitor.get(path, follow_redirects=False)
        assert response.status_code == NOT_200.get(route, 200), (path, response.status_code, response.text[:300])
        assert_security_headers(response, route)


def test_head_answers_like_get_without_a_body_on_every_get_route(app, visitor):
    for route in get_routes(app):
        path = real_path(route, visitor.values)
        got = visitor.get(path, follow_redirects=False)
        head = visitor.head(path, follow_redirects=False)
        assert head.status_code == got.status_code == NOT_200.get(route, 200), (path, head.status_code)
        assert head.content == b"", path
        assert head.headers["content-type"] == got.headers["content-type"], path
        if "content-length" in got.headers:  # a page's CSRF token and nonce change, not their lengths
            assert head.headers["content-length"] == got.headers["content-length"], path
        assert_security_headers(head, route)


def test_head_of_a_new_visitors_cached_lesson_page_and_of_healthz(client, app):
    lesson = app.state.course.lessons[0].slug
    for path in ("/", f"/lessons/{lesson}", f"/lessons/{lesson}", "/healthz"):
        response = client.head(path)
        assert (response.status_code, response.content) == (200, b""), path
        assert int(response.headers["content-length"]) > 0


def test_refusals_static_files_and_figures_carry_them_too(client, app):
    assert_security_headers(client.get("/no-such-page", headers={"accept": "text/html"}), "/no-such-page")
    assert_security_headers(client.get("/api/no-such-thing"), "/api/no-such-thing")
    big = client.post("/api/lessons/x/read", content=b"x" * (app.state.settings.max_body_bytes + 1))
    assert big.status_code == 413
    assert_security_headers(big, "/api/lessons/x/read")
    assert_security_headers(client.get("/static/css/site.css"), "/static/css/site.css")
    figure = client.get("/static/favicon.svg")
    assert figure.headers["content-security-policy"] == SVG_CSP  # our own SVGs may use their <style>


def test_head_on_a_post_only_route_is_refused_like_get(client):
    response = client.head("/logout")
    assert response.status_code == 405 and "POST" in response.headers["allow"]


def test_production_adds_hsts(tmp_path):
    from fastapi.testclient import TestClient

    from app.main import create_app

    app = create_app(make_settings(tmp_path, migrate=True, env="production", secret_key="s" * 48))
    with TestClient(app, base_url="https://testserver") as browser:
        response = browser.get("/healthz")
    assert response.headers["strict-transport-security"] == f"max-age={HSTS_MAX_AGE_S}"
    assert_security_headers(response, "/healthz", production=True)
    app.state.db.dispose()


def test_templates_have_no_inline_script_style_or_handlers():
    """The policy forbids inline script; style attributes are allowed only for the editor's sake, not used here."""
    from app import ROOT

    problems = []
    for path in sorted((ROOT / "templates").rglob("*.html")):
        html = re.sub(r"\{#.*?#\}", "", path.read_text(encoding="utf-8"), flags=re.S)  # Jinja comments
        for tag in re.findall(r"<script\b[^>]*>", html):
            if "src=" not in tag and 'type="application/json"' not in tag:  # JSON data blocks never run
                problems.append(f"{path.name}: inline script {tag}")
        problems += [f"{path.name}: {m}" for m in re.findall(r"<style\b|\sstyle=|\son[a-z]+=|javascript:", html)]
    assert problems == []
