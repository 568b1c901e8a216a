"""The first-visit page cache: new visitors share one rendering, each with their own working CSRF token."""

from __future__ import annotations

import re

LESSON = "/lessons/cpu-gpu-border"


def _token(html: str) -> str:
    tokens = set(re.findall(r'name="csrf_token" value="([^"]+)"', html))
    assert len(tokens) == 1, tokens
    return tokens.pop()


def test_two_new_visitors_get_their_own_token_and_it_works(make_client):
    first, second = make_client(csrf=False), make_client(csrf=False)
    one, two = first.get(LESSON), second.get(LESSON)
    assert one.status_code == two.status_code == 200
    assert "course_session" in one.cookies and "course_session" in two.cookies
    token_one, token_two = _token(one.text), _token(two.text)
    assert token_one != token_two
    assert "csrf-placeholder-" not in one.text + two.text and "nonce-placeholder-" not in one.text + two.text
    for page in (one, two):  # the page's style nonce is the one its own CSP header allows
        nonce = re.search(r"'nonce-([^']+)'", page.headers["content-security-policy"]).group(1)
        assert f'nonce="{nonce}"' in page.text or f"nonce={nonce}" in page.text
    # each page's token is the one its own session holds: a state change with it is accepted
    read = first.post("/api/lessons/cpu-gpu-border/read", headers={"X-CSRF-Token": token_one})
    assert read.status_code == 200, read.text
    crossed = second.post("/api/lessons/cpu-gpu-border/read", headers={"X-CSRF-Token": token_one})
    assert crossed.status_code == 403


def test_a_new_comment_reaches_the_next_new_visitor_at_once(make_client, signed_in_client):
    make_client(csrf=False).get(LESSON)  # fills the cache
    author = signed_in_client()
    posted = author.post("/api/lessons/cpu-gpu-border/comments", json={"body": "cache-busting comment 4711"})
    assert posted.status_code == 201, posted.text
    assert "cache-busting comment 4711" in make_client(csrf=False).get(LESSON).text


def test_a_returning_learner_sees_their_own_state_not_the_shared_page(make_client):
    learner = make_client()
    shared = make_client(csrf=False).get(LESSON).text
    learner.post("/api/lessons/cpu-gpu-border/read")
    mine = learner.get(LESSON).text
    assert _token(mine) == learner.headers["X-CSRF-Token"]
    assert mine != shared.replace(_token(shared), learner.headers["X-CSRF-Token"])


def test_the_cached_answer_carries_what_the_rendered_one_does(make_client):
    rendered = make_client(csrf=False).get(LESSON)  # nothing cached yet: the route renders it
    visitor = make_client(csrf=False)
    cached = visitor.get(LESSON)  # no session cookie: answered from the cache before the rest of the stack
    assert rendered.status_code == cached.status_code == 200
    assert [name for name, _ in rendered.headers.multi_items()] == [name for name, _ in cached.headers.multi_items()]
    for name in ("vary", "x-frame-options", "permissions-policy", "content-type"):
        assert rendered.headers[name] == cached.headers[name]
    cookie_flags = lambda r: r.headers["set-cookie"].split(";", 1)[1]  # noqa: E731
    assert cookie_flags(rendered) == cookie_flags(cached)
    # the cookie holds the session the identity middleware reads: the page's token works for a state change
    read = visitor.post("/api/lessons/cpu-gpu-border/read", headers={"X-CSRF-Token": _token(cached.text)})
    assert read.status_code == 200, read.text


def test_a_visitor_with_an_unreadable_cookie_gets_the_page_and_a_new_session(make_client):
    make_client(csrf=False).get(LESSON)
    visitor = make_client(csrf=False)
    visitor.cookies.set("course_session", "not-a-signed-value")
    page = visitor.get(LESSON)  # a Cookie header: the route serves it, from the same cache
    assert page.status_code == 200 and "course_session" in page.headers["set-cookie"]
    read = visitor.post("/api/lessons/cpu-gpu-border/read", headers={"X-CSRF-Token": _token(page.text)})
    assert read.status_code == 200, read.text


def test_a_stale_page_is_answered_at_once_and_rendered_again_behind_it(app, make_client, monkeypatch):
    """The request that finds its page stale does not wait for the render (4-6 ms of CPU, and it was the slowest
    page read of its lesson every TTL_S): it gets the previous copy, with its own token, while a task renders."""
    import threading
    import time

    from app.web.middleware import page_cache
    from app.web.routes import lessons

    make_client(csrf=False).get(LESSON)  # fills the cache
    monkeypatch.setattr(page_cache, "TTL_S", -1.0)  # every cached page is stale from now on
    release, rendered = threading.Event(), []
    first_visit_html = lessons._first_visit_html

    def held_render(*args):
        assert release.wait(30), "the test never let the render go"
        rendered.append(first_visit_html(*args))
        return rendered[-1]

    monkeypatch.setattr(lessons, "_first_visit_html", held_render)
    visitor = make_client(csrf=False)
    stale = visitor.get(LESSON)  # answered while the render is held
    assert stale.status_code == 200 and not rendered
    assert "csrf-placeholder-" not in stale.text and "nonce-placeholder-" not in stale.text
    nonce = re.search(r"'nonce-([^']+)'", stale.headers["content-security-policy"]).group(1)
    assert f'nonce="{nonce}"' in stale.text or f"nonce={nonce}" in stale.text
    release.set()
    deadline = time.monotonic() + 30
    while not rendered and time.monotonic() < deadline:
        time.sleep(0.01)
    assert rendered and page_cache.PLACEHOLDER in rendered[0]  # the shared page, for every new visitor's token
    read = visitor.post("/api/lessons/cpu-gpu-border/read", headers={"X-CSRF-Token": _token(stale.text)})
    assert read.status_code == 200, read.text
