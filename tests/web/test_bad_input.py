"""Bad input at the API: every refusal is a 4xx with a JSON {"detail"} that says what to do, never a 5xx.

Code over the limit, bodies that are not UTF-8 or not JSON, a 10 MB body (refused before it is read: the test
hands the app the body itself and counts what it takes), unknown ids, another learner's submission, the wrong
content type, an oversized comment, and form fields that are not UTF-8.
"""

from __future__ import annotations

import json

import anyio
import pytest

from app.web.routes.comments import MAX_ID
from tests.helpers import parse_sse

EXERCISE = "same-device"
SUBMIT = f"/api/exercises/{EXERCISE}/submissions"
MB = 1 << 20
CHUNK = 64 * 1024  # bytes per ASGI body message, what uvicorn hands an app at a time for a large body


@pytest.fixture
def lesson(app) -> str:
    """A lesson of the course, to comment on."""
    return app.state.course.lessons[0].slug


def detail(response) -> str:
    """Return the response's {"detail"} as text (a list of validation errors joined), after checking its shape."""
    assert response.headers["content-type"].startswith("application/json"), response.text[:200]
    value = response.json()["detail"]
    assert value, response.text
    return value if isinstance(value, str) else " ".join(error["msg"] for error in value)


# --- code ----------------------------------------------------------------------------------------------------


def test_code_over_the_limit_is_413_naming_size_and_limit(client, settings):
    code = "x = 1\n" * (settings.sandbox_source_bytes // 6 + 100)

    response = client.post(SUBMIT, json={"code": code})

    assert response.status_code == 413
    message = detail(response)
    assert f"the limit is {settings.sandbox_source_bytes // 1024} KiB" in message and "Shorten it" in message


def test_code_nested_past_the_parser_gets_a_verdict_not_a_server_error(client):
    # `not not ... x` 5000 deep: ast.parse raises RecursionError while building the tree (CPython 3.11), which the
    # grader's source readers (placement map, check messages, the attempt digest) must take as "not Python"
    code = "x = " + "not " * 5000 + "True\nprint(x)\n"

    response = client.post(SUBMIT, json={"code": code})

    assert response.status_code == 202, response.text
    events = parse_sse(client.get(f"/api/submissions/{response.json()['id']}/events").text)
    assert events[-1][0] == "verdict", events[-3:]
    verdict = events[-1][1]
    runs = next(check for check in verdict["checks"] if check["id"] == "runs")
    assert verdict["status"] == "failed" and "RecursionError" in runs["message"], verdict


def test_code_that_is_not_utf8_is_400(client):
    response = client.post(SUBMIT, content=b'{"code": "print(\'caf\xe9\')"}',
                           headers={"content-type": "application/json"})  # fmt: skip

    assert response.status_code == 400
    assert "not valid UTF-8" in detail(response) and "save it as UTF-8" in detail(response)


@pytest.mark.parametrize("body", [b'{"code": "print(1)', b"code=print(1)", b""])
def test_code_body_that_is_not_json_is_400_showing_the_shape_to_send(client, body):
    response = client.post(SUBMIT, content=body, headers={"content-type": "application/json"})

    assert response.status_code == 400
    assert 'send {"code": "..."}' in detail(response)


@pytest.mark.parametrize("payload", [["print(1)"], {"code": 1}, {"source": "print(1)"}, "print(1)"])
def test_code_json_without_a_code_string_is_422(client, payload):
    response = client.post(SUBMIT, json=payload)

    assert response.status_code == 422
    assert '{"code": "..."}' in detail(response)


# --- bodies too large: refused before they are read ----------------------------------------------------------


def test_a_10_mb_json_body_is_413_with_what_to_do(client, settings):
    body = b'{"code": "' + b"x" * (10 * MB) + b'"}'

    response = client.post("/api/auth/login", content=body, headers={"content-type": "application/json"})

    assert response.status_code == 413
    assert f"the limit is {settings.max_body_bytes // 1024} KiB" in detail(response)
    assert "Send less" in detail(response)


def call_app(client, path: str, declared: int | None, total: int) -> tuple[int, dict, int]:
    """Send `total` bytes to the app at ASGI level in CHUNK-sized messages, as a server would, with
    Content-Length `declared` (None: a chunked body). Return (status, JSON body, bytes the app took)."""
    app = client.app
    headers = [(b"content-type", b"application/json"), (b"x-csrf-token", client.headers["X-CSRF-Token"].encode()),
               (b"cookie", "; ".join(f"{k}={v}" for k, v in client.cookies.items()).encode())]  # fmt: skip
    if declared is not None:
        headers.append((b"content-length", str(declared).encode()))
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"", "headers": headers,
             "client": ("127.0.0.1", 50000), "server": ("testserver", 80)}  # fmt: skip
    taken = 0
    sent: list[dict] = []

    async def receive() -> dict:
        nonlocal taken
        if taken >= total:
            await anyio.sleep_forever()  # like a client that keeps the connection open
        chunk = min(CHUNK, total - taken)
        taken += chunk
        return {"type": "http.request", "body": b"x" * chunk, "more_body": taken < total}

    async def send(message: dict) -> None:
        sent.append(message)

    async def run() -> None:
        with anyio.fail_after(30):
            await app(scope, receive, send)

    client.portal.call(run)  # the event loop where the app's lifespan runs
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, json.loads(body), taken


def test_a_10_mb_body_with_content_length_is_refused_without_reading_a_byte(client):
    status, body, taken = call_app(client, "/api/auth/login", declared=10 * MB, total=10 * MB)

    assert status == 413 and "10240 KiB" in body["detail"]
    assert taken == 0


@pytest.mark.parametrize("path", ["/api/auth/login", "/api/lessons/{lesson}/comments"])
def test_a_chunked_10_mb_body_is_refused_once_past_the_limit(client, settings, lesson, path):
    status, body, taken = call_app(client, path.format(lesson=lesson), declared=None, total=10 * MB)

    assert status == 413 and "over the limit" in body["detail"]
    # the app held at most the limit plus the chunk that crossed it, not 10 MB
    assert settings.max_body_bytes < taken <= settings.max_body_bytes + CHUNK


def test_a_chunked_10_mb_submission_stops_at_the_code_limit(client, settings):
    status, body, taken = call_app(client, SUBMIT, declared=None, total=10 * MB)

    assert status == 413 and "the code is over the limit" in body["detail"].lower()
    assert taken <= settings.sandbox_source_bytes * 6 + 4096 + CHUNK  # the route's own, smaller cap


def test_the_body_limit_stays_above_the_largest_program_sent_as_json(settings):
    # a program at the source limit, every byte escaped as \\u00XX, must reach the route's own message
    assert settings.max_body_bytes > settings.sandbox_source_bytes * 6 + 4096


# --- unknown ids and other people's things -------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/api/submissions/{id}", "/api/submissions/{id}/events"])
def test_unknown_submission_is_404(client, path):
    response = client.get(path.format(id="0123456789abcdef0123456789abcdef"))

    assert response.status_code == 404
    assert "does not exist or belongs to another learner" in detail(response)


def test_unknown_exercise_is_404_listing_the_ones_there_are(client):
    response = client.post("/api/exercises/no-such-exercise/submissions", json={"code": "print(1)"})

    assert response.status_code == 404
    assert "no-such-exercise" in detail(response) and EXERCISE in detail(response)


@pytest.mark.parametrize("method, path, payload", [
    ("PATCH", "/api/comments/{id}", {"body": "edited"}),
    ("DELETE", "/api/comments/{id}", None),
])  # fmt: skip
@pytest.mark.parametrize("comment_id", [999_999, MAX_ID])
def test_unknown_comment_is_404(signed_in_client, method, path, payload, comment_id):
    response = signed_in_client().request(method, path.format(id=comment_id), json=payload)

    assert response.status_code == 404
    assert str(comment_id) in detail(response)


def test_unknown_comment_to_hide_is_404_for_an_instructor(instructor_client):
    response = instructor_client.post("/api/comments/999999/hide")

    assert response.status_code == 404


def test_unknown_lesson_has_no_comments_404(client):
    response = client.get("/api/lessons/no-such-lesson/comments")

    assert response.status_code == 404
    assert "no-such-lesson" in detail(response)


@pytest.mark.slow  # runs one real sandbox job
def test_another_learners_submission_is_404_like_an_unknown_one(client, make_client):
    """The owner reads it; anyone else gets the 404 an unknown id gets, so ids cannot be probed."""
    submitted = client.post(SUBMIT, json={"code": "print('mine')"})
    assert submitted.status_code == 202, submitted.text
    own = submitted.json()["id"]
    assert client.get(f"/api/submissions/{own}").status_code == 200
    other = make_client()

    for path in (f"/api/submissions/{own}", f"/api/submissions/{own}/events"):
        response = other.get(path)
        assert response.status_code == 404
        assert "belongs to another learner" in detail(response)
    assert other.get(f"/api/exercises/{EXERCISE}/submissions").json()["attempts"] == []


def test_another_learners_comment_cannot_be_edited_or_deleted(signed_in_client, lesson):
    ann, bob = signed_in_client(name="Ann"), signed_in_client(name="Bob")
    comment_id = ann.post(f"/api/lessons/{lesson}/comments", json={"body": "Ann's"}).json()["id"]

    for response in (bob.patch(f"/api/comments/{comment_id}", json={"body": "Bob's now"}),
                     bob.delete(f"/api/comments/{comment_id}")):  # fmt: skip
        assert response.status_code == 403
        assert detail(response)
    assert ann.get(f"/api/lessons/{lesson}/comments").json()["comments"][0]["body"] == "Ann's"


# --- malformed JSON, the wrong content type, oversized comments ----------------------------------------------


@pytest.mark.parametrize("body", [b'{"email": ', b"[1, 2", b"\x00", b'{"email": "a@b.c", "password": }'])
def test_malformed_json_is_422_with_where_it_broke(client, body):
    response = client.post("/api/auth/login", content=body, headers={"content-type": "application/json"})

    assert response.status_code == 422
    assert response.json()["detail"][0]["type"] == "json_invalid"
    assert response.json()["detail"][0]["loc"][0] == "body"  # ["body", <offset>]: where to look


def test_json_that_is_not_utf8_is_400_saying_so(signed_in_client, lesson):
    latin1 = '{"body": "café"}'.encode("latin-1")

    response = signed_in_client().post(f"/api/lessons/{lesson}/comments", content=latin1,
                                       headers={"content-type": "application/json"})  # fmt: skip

    assert response.status_code == 400
    assert "UTF-8" in detail(response) and "Fix the encoding" in detail(response)


# deeper than Python's parser recurses: a RecursionError, which the submissions route let through as a 500
BOTTOMLESS = b"[" * 300_000


def test_json_nested_too_deep_for_the_parser_is_400_on_the_submissions_route(client):
    response = client.post("/api/exercises/same-device/submissions", content=BOTTOMLESS,
                           headers={"content-type": "application/json"})  # fmt: skip

    assert response.status_code == 400, response.text
    assert "nests JSON too deep" in detail(response) and '{"code": "..."}' in detail(response)


@pytest.mark.parametrize("path", ["/api/auth/login", "/api/auth/signup", "/api/lessons/{lesson}/comments",
                                  "/api/account/profile", "/api/exercises/same-device/submissions"])
def test_json_nested_too_deep_is_400_on_every_json_route(signed_in_client, lesson, path):
    response = signed_in_client().post(path.format(lesson=lesson), content=BOTTOMLESS,
                                       headers={"content-type": "application/json"})  # fmt: skip

    assert response.status_code == 400, response.text
    assert "nest" in detail(response)


@pytest.mark.parametrize("content_type, body", [
    ("text/plain", b'{"email": "a@example.org", "password": "secret-password"}'),
    ("application/x-www-form-urlencoded", b"email=a%40example.org&password=secret-password"),
])  # fmt: skip
def test_wrong_content_type_says_send_json_and_does_not_echo_the_body(client, content_type, body):
    response = client.post("/api/auth/login", content=body, headers={"content-type": content_type})

    assert response.status_code == 422
    assert f"Content-Type: application/json (not {content_type})" in detail(response)
    assert "secret-password" not in response.text


def test_oversized_comment_is_413_saying_how_much_to_cut(signed_in_client, settings, lesson):
    response = signed_in_client().post(f"/api/lessons/{lesson}/comments",
                                       json={"body": "x" * (settings.comment_max_chars + 5)})  # fmt: skip

    assert response.status_code == 413
    assert "Shorten it by 5 characters" in detail(response)


def test_blank_comment_is_422_saying_write_something(signed_in_client, lesson):
    response = signed_in_client().post(f"/api/lessons/{lesson}/comments", json={"body": " \n\t"})

    assert response.status_code == 422
    assert "write something" in detail(response)


def test_method_not_allowed_lists_every_method_the_address_takes(client, lesson):
    response = client.put(f"/api/lessons/{lesson}/comments", json={"body": "x"})

    assert response.status_code == 405
    assert response.headers["allow"] == "GET, HEAD, POST"
    assert "accepts GET, HEAD, POST" in detail(response)


# --- forms: fields that are not UTF-8 are refused, and nothing is stored or run -------------------------------


def form(browser, path: str, raw: bytes, content_type: str = "application/x-www-form-urlencoded"):
    token = browser.headers["X-CSRF-Token"].encode()
    return browser.post(path, content=raw + b"&csrf_token=" + token, follow_redirects=False,
                        headers={"content-type": content_type})  # fmt: skip


@pytest.mark.parametrize("raw", [b"body=caf%E9+%FF%FE", b"body=caf\xe9", "body=café".encode()])
def test_comment_form_with_non_utf8_field_is_refused_and_nothing_is_stored(signed_in_client, lesson, raw):
    """Browsers send this site's forms as UTF-8; other bytes are refused, not silently turned into U+FFFD."""
    browser = signed_in_client()

    response = form(browser, f"/lessons/{lesson}/comments", raw)

    assert response.status_code == 400
    assert "`body` is not valid UTF-8" in detail(response) and "nothing was saved" in detail(response)
    assert browser.get(f"/api/lessons/{lesson}/comments").json()["comments"] == []
    ok = form(browser, f"/lessons/{lesson}/comments", b"body=caf%C3%A9+%E2%9C%93")  # what a browser sends
    assert ok.status_code == 303
    assert browser.get(f"/api/lessons/{lesson}/comments").json()["comments"][0]["body"] == "café ✓"


def test_multipart_comment_with_non_utf8_field_is_refused(signed_in_client, lesson):
    browser = signed_in_client()
    token = browser.headers["X-CSRF-Token"].encode()
    body = (b'--XX\r\nContent-Disposition: form-data; name="csrf_token"\r\n\r\n' + token + b"\r\n"
            b'--XX\r\nContent-Disposition: form-data; name="body"\r\n\r\ncaf\xe9\r\n--XX--\r\n')

    response = browser.post(f"/lessons/{lesson}/comments", content=body, follow_redirects=False,
                            headers={"content-type": "multipart/form-data; boundary=XX"})

    assert response.status_code == 400 and "`body` is not valid UTF-8" in detail(response)
    assert browser.get(f"/api/lessons/{lesson}/comments").json()["comments"] == []


def test_run_form_with_non_utf8_code_is_refused_before_it_runs(client):
    response = form(client, f"/exercises/{EXERCISE}/run", b"code=print(%22caf%E9%22)")

    assert response.status_code == 400 and "`code` is not valid UTF-8" in detail(response)
    assert client.get(f"/api/exercises/{EXERCISE}/submissions").json()["attempts"] == []


def test_login_form_with_non_utf8_email_is_refused(client):
    response = form(client, "/login", b"email=%FF%FE%00&password=x")

    assert response.status_code == 400 and "`email` is not valid UTF-8" in detail(response)


def test_a_reply_to_true_is_refused_not_read_as_comment_one(signed_in_client, lesson):
    browser = signed_in_client()
    first = browser.post(f"/api/lessons/{lesson}/comments", json={"body": "first"}).json()["id"]
    response = browser.post(f"/api/lessons/{lesson}/comments", json={"body": "x", "parent_id": True})
    assert first == 1 and response.status_code == 422  # schemathesis found that lax validation read true as 1
