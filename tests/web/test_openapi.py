"""The accounts API is documented in FastAPI's OpenAPI schema, exactly as issue 3 lists it."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.small_course  # two small lessons of its own (alpha, beta), not the course

API = {
    ("post", "/api/auth/signup"), ("post", "/api/auth/login"), ("post", "/api/auth/logout"),
    ("get", "/api/auth/csrf"), ("get", "/api/me"),
    ("get", "/api/lessons/{slug}/comments"), ("post", "/api/lessons/{slug}/comments"),
    ("patch", "/api/comments/{comment_id}"), ("delete", "/api/comments/{comment_id}"),
    ("post", "/api/comments/{comment_id}/hide"), ("get", "/api/progress"), ("post", "/api/lessons/{slug}/read"),
}  # fmt: skip


def test_every_accounts_route_is_in_the_openapi_schema(client):
    schema = client.get("/openapi.json").json()
    documented = {(method, path) for path, item in schema["paths"].items() for method in item}
    assert API <= documented, API - documented
    for method, path in API:
        operation = schema["paths"][path][method]
        assert operation.get("summary") and operation.get("description"), (method, path)
    assert "429" in schema["paths"]["/api/auth/login"]["post"]["responses"]
    assert "413" in schema["paths"]["/api/lessons/{slug}/comments"]["post"]["responses"]


def test_html_form_routes_stay_out_of_the_api_schema(client):
    paths = client.get("/openapi.json").json()["paths"]
    assert not {"/login", "/signup", "/logout", "/progress"} & set(paths)
