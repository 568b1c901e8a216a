"""Comment threads over HTTP: posting, replies, editing, moderation, pagination, limits and inert Markdown."""

from __future__ import annotations

import re

import pytest
from markupsafe import escape

from app.community.comments import PER_PAGE, render_markdown
from tests.web.xss_payloads import PAYLOADS, unsafe_markup

pytestmark = [pytest.mark.small_course, pytest.mark.both_databases]  # two small lessons of its own


def post(browser, body, lesson="alpha", parent_id=None):
    return browser.post(f"/api/lessons/{lesson}/comments", json={"body": body, "parent_id": parent_id})


def thread(browser, lesson="alpha", **params):
    response = browser.get(f"/api/lessons/{lesson}/comments", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def test_a_lesson_without_comments_says_so(client):
    assert thread(client) == {"lesson": "alpha", "count": 0, "page": 1, "pages": 1, "per_page": 50, "comments": []}
    page = client.get("/lessons/alpha")
    assert "No comments yet" in page.text and "Log in</a> or" in page.text


def test_signed_in_users_post_and_everyone_reads(client, signed_in_client):
    ann = signed_in_client(name="Ann")
    response = post(ann, "Why does **`.to()`** return a new tensor?")
    assert response.status_code == 201, response.text
    created = response.json()
    assert created["author"]["display_name"] == "Ann"
    assert created["html"] == "<p>Why does <strong><code>.to()</code></strong> return a new tensor?</p>\n"

    listing = thread(client)
    assert listing["count"] == 1 and listing["comments"][0]["body"] == "Why does **`.to()`** return a new tensor?"
    page = client.get("/lessons/alpha")
    assert "Comments <span class=\"comment-count\">(1)</span>" in page.text
    assert "<strong><code>.to()</code></strong>" in page.text


def test_anonymous_visitors_cannot_post(client):
    response = post(client, "hello")
    assert response.status_code == 401 and "Sign in" in response.json()["detail"]


def test_unknown_lesson_and_comment_are_404(signed_in_client):
    ann = signed_in_client()
    assert post(ann, "hi", lesson="no-such-lesson").status_code == 404
    assert ann.get("/api/lessons/no-such-lesson/comments").status_code == 404
    assert ann.patch("/api/comments/999", json={"body": "x"}).status_code == 404
    assert ann.delete("/api/comments/999").status_code == 404


def test_too_long_is_413_with_a_clear_message_and_empty_is_422(signed_in_client, settings):
    ann = signed_in_client()
    response = post(ann, "x" * (settings.comment_max_chars + 12))
    assert response.status_code == 413
    assert response.json()["detail"] == (
        f"The comment is {settings.comment_max_chars + 12:,} characters; the limit is "
        f"{settings.comment_max_chars:,}. Shorten it by 12 characters."
    )
    assert post(ann, "x" * settings.comment_max_chars).status_code == 201
    assert post(ann, "   \n ").status_code == 422
    assert post(ann, None).status_code == 422  # not a string at all


def test_replies_go_one_level_deep(signed_in_client):
    ann, bob = signed_in_client(name="Ann"), signed_in_client(name="Bob")
    top = post(ann, "top").json()["id"]
    reply = post(bob, "reply", parent_id=top)
    assert reply.status_code == 201
    deeper = post(ann, "reply to the reply", parent_id=reply.json()["id"])
    assert deeper.status_code == 400 and "one level" in deeper.json()["detail"]
    elsewhere = post(ann, "wrong lesson", lesson="beta", parent_id=top)
    assert elsewhere.status_code == 400
    listing = thread(ann)
    assert listing["count"] == 2
    assert [r["body"] for r in listing["comments"][0]["replies"]] == ["reply"]


def test_edit_own_comment_is_marked_edited(signed_in_client):
    ann = signed_in_client(name="Ann")
    comment = post(ann, "frist").json()
    assert comment["edited"] is False
    response = ann.patch(f"/api/comments/{comment['id']}", json={"body": "first"})
    assert response.status_code == 200
    assert response.json()["edited"] is True and response.json()["body"] == "first"
    page = ann.get("/lessons/alpha").text
    assert "(edited)" in page and "first" in page


def test_a_learner_cannot_touch_someone_elses_comment_and_an_instructor_can(signed_in_client, instructor_client):
    ann, bob = signed_in_client(name="Ann"), signed_in_client(name="Bob")
    comment_id = post(ann, "Ann's comment").json()["id"]

    assert bob.patch(f"/api/comments/{comment_id}", json={"body": "vandalised"}).status_code == 403
    assert bob.delete(f"/api/comments/{comment_id}").status_code == 403
    assert bob.post(f"/api/comments/{comment_id}/hide").status_code == 403
    assert ann.post(f"/api/comments/{comment_id}/hide").status_code == 403  # not even the author
    assert thread(bob)["comments"][0]["body"] == "Ann's comment"

    # instructors hide (and still see) any comment; learners no longer see it, the author does, marked
    assert instructor_client.post(f"/api/comments/{comment_id}/hide").json()["hidden"] is True
    assert thread(bob)["count"] == 0
    assert thread(ann)["comments"][0]["hidden"] is True
    assert thread(instructor_client)["comments"][0]["hidden"] is True
    assert "hidden from learners" in instructor_client.get("/lessons/alpha").text
    assert bob.patch(f"/api/comments/{comment_id}", json={"body": "x"}).status_code == 404

    shown = instructor_client.post(f"/api/comments/{comment_id}/hide", json={"hidden": False})
    assert shown.json()["hidden"] is False and thread(bob)["count"] == 1
    assert instructor_client.patch(f"/api/comments/{comment_id}", json={"body": "x"}).status_code == 403

    assert instructor_client.delete(f"/api/comments/{comment_id}").status_code == 204
    assert thread(bob)["count"] == 0 and thread(bob)["comments"] == []


def test_deleting_keeps_replies_under_a_placeholder(signed_in_client):
    ann, bob = signed_in_client(name="Ann"), signed_in_client(name="Bob")
    top = post(ann, "secret plan").json()["id"]
    post(bob, "a reply", parent_id=top)
    assert ann.delete(f"/api/comments/{top}").status_code == 204
    listing = thread(bob)
    assert listing["count"] == 1
    assert listing["comments"][0]["deleted"] is True and listing["comments"][0]["body"] == ""
    assert listing["comments"][0]["replies"][0]["body"] == "a reply"
    page = bob.get("/lessons/alpha").text
    assert "This comment was deleted." in page and "secret plan" not in page


def test_pagination_past_fifty(app, signed_in_client):
    # 53 comments from one person would trip the comment limits (tests/web/test_rate_limits.py); this is paging
    app.state.settings = app.state.settings.model_copy(update={"comment_rate_limit": "1000/minute",
                                                              "comment_address_rate_limit": "1000/minute"})
    ann = signed_in_client(name="Ann")
    for i in range(PER_PAGE + 3):
        assert post(ann, f"comment {i}").status_code == 201
    first, second = thread(ann), thread(ann, page=2)
    assert first["count"] == second["count"] == PER_PAGE + 3
    assert first["pages"] == 2 and len(first["comments"]) == PER_PAGE
    assert [c["body"] for c in second["comments"]] == [f"comment {i}" for i in range(PER_PAGE, PER_PAGE + 3)]
    page = ann.get("/lessons/alpha", params={"comments_page": 2}).text
    assert "comment 52" in page and "comment 3<" not in page and 'href="?comments_page=1#comments"' in page


def test_no_javascript_forms_post_and_delete(signed_in_client, settings):
    ann = signed_in_client(name="Ann")
    token = ann.headers.pop("X-CSRF-Token")
    response = ann.post("/lessons/alpha/comments", data={"body": "from a form", "csrf_token": token},
                        follow_redirects=False)  # fmt: skip
    assert response.status_code == 303 and response.headers["location"] == "/lessons/alpha#comments"
    too_long = ann.post("/lessons/alpha/comments", data={"body": "x" * (settings.comment_max_chars + 1),
                                                         "csrf_token": token})  # fmt: skip
    assert "the limit is" in too_long.text  # shown above the thread after the redirect
    comment_id = thread(ann)["comments"][0]["id"]
    ann.post(f"/comments/{comment_id}/delete", data={"csrf_token": token})
    assert thread(ann)["count"] == 0


@pytest.mark.parametrize("payload", PAYLOADS)
def test_xss_payloads_are_stored_as_typed_and_rendered_inert(client, signed_in_client, payload):
    mallory = signed_in_client(name="Mallory")
    response = post(mallory, payload)
    assert response.status_code == 201, response.text
    stored = thread(client)["comments"][0]
    assert stored["body"] == payload  # stored exactly as typed
    assert unsafe_markup(stored["html"]) == [], stored["html"]
    page = client.get("/lessons/alpha").text
    bodies = re.findall(r'<div class="comment-body">(.*?)</div>', page, flags=re.S)
    assert len(bodies) == 1
    assert unsafe_markup(bodies[0]) == [], bodies[0]
    section = page[page.index('id="comments"') : page.index("</section>", page.index('id="comments"'))]
    assert "<script" not in section.lower() and "<svg" not in section.lower()


def test_rendered_links_are_nofollow_and_only_safe_schemes_survive():
    rendered = render_markdown("[docs](https://pytorch.org) <https://example.org> [mail](mailto:a@b.org)")
    assert rendered.count('rel="nofollow noopener ugc"') == 3
    assert "href" not in render_markdown("[x](javascript:alert(1))")
    assert "<img" not in render_markdown("![alt](https://example.org/x.png)")


def test_display_names_are_escaped(client, signed_in_client):
    evil = signed_in_client(name="<script>alert('name')</script>")
    post(evil, "hi")
    page = client.get("/lessons/alpha").text
    assert "<script>alert('name')" not in page
    assert str(escape("<script>alert('name')</script>")) in page


@pytest.mark.parametrize(
    "method, path, body",
    [
        ("POST", "/api/lessons/alpha/comments", {"body": "x", "parent_id": 2**70}),
        ("POST", "/api/lessons/alpha/comments", {"body": "x", "parent_id": 0}),
        ("PATCH", f"/api/comments/{2**70}", {"body": "x"}),
        ("DELETE", f"/api/comments/{2**70}", None),
        ("POST", f"/api/comments/{2**70}/hide", None),
        ("GET", f"/api/lessons/alpha/comments?page={2**70}", None),
        ("POST", "/api/lessons/alpha/comments", {"body": "a NUL \x00 byte"}),
        ("POST", "/api/lessons/alpha/comments", ["not", "an", "object"]),
        ("POST", "/api/comments/1/hide", {"hidden": "maybe"}),
    ],
)
def test_odd_input_is_a_4xx_with_detail_never_a_500(signed_in_client, method, path, body):
    response = signed_in_client().request(method, path, json=body)
    assert response.status_code == 422, response.text
    assert response.json()["detail"]


def test_no_javascript_edit_form(signed_in_client):
    ann, bob = signed_in_client(name="Ann"), signed_in_client(name="Bob")
    comment_id = post(ann, "typo hre").json()["id"]
    token = ann.headers.pop("X-CSRF-Token")
    assert 'action="/comments/%d/edit"' % comment_id in ann.get("/lessons/alpha").text
    response = ann.post(f"/comments/{comment_id}/edit", data={"body": "typo here", "csrf_token": token},
                        follow_redirects=False)  # fmt: skip
    assert response.status_code == 303
    assert thread(ann)["comments"][0]["body"] == "typo here" and thread(ann)["comments"][0]["edited"]
    assert 'action="/comments/%d/edit"' % comment_id not in bob.get("/lessons/alpha").text
    bob_token = bob.headers["X-CSRF-Token"]
    assert bob.post(f"/comments/{comment_id}/edit", data={"body": "x", "csrf_token": bob_token}).status_code == 403
