"""Reporting comments and the moderation queue over HTTP: one report per person with a reason, hiding at
COURSE_COMMENT_REPORT_HIDE_AT reports until an instructor reviews, and show, hide and delete from the queue."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.small_course  # two small lessons of its own (alpha, beta), not the course


def post(browser, body: str) -> int:
    response = browser.post("/api/lessons/alpha/comments", json={"body": body})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def report(browser, comment_id: int, reason: str = "Rude to other learners."):
    return browser.post(f"/api/comments/{comment_id}/report", json={"reason": reason})


def seen(browser, comment_id: int) -> dict | None:
    """The comment as this browser sees it in the thread, or None when it does not see it."""
    comments = browser.get("/api/lessons/alpha/comments").json()["comments"]
    return next((c for c in comments if c["id"] == comment_id), None)


def queue_item(instructor, comment_id: int) -> str | None:
    """The comment's entry in the moderation queue page, or None when it is not in the queue."""
    page = instructor.get("/instructor/comments").text
    marker = f'id="queue-{comment_id}"'
    return page.split(marker)[1].split("</li>\n    \n")[0] if marker in page else None


def review(instructor, comment_id: int, action: str):
    response = instructor.post(f"/instructor/comments/{comment_id}", data={"action": action}, follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == f"/instructor/comments#queue-{comment_id}"


@pytest.fixture
def comment(signed_in_client):
    """A comment by Ann under lesson alpha; returns (Ann's browser, its id)."""
    ann = signed_in_client("ann@example.org", name="Ann")
    return ann, post(ann, "Just copy the solution, it is in lesson 3.")


def test_a_learner_reports_once_with_a_reason(comment, signed_in_client):
    _ann, comment_id = comment
    ben = signed_in_client("ben@example.org", name="Ben")
    assert seen(ben, comment_id)["can_report"] and not seen(ben, comment_id)["reported"]
    response = report(ben, comment_id)
    assert response.status_code == 201 and response.json() == {"comment_id": comment_id, "reported": True,
                                                               "hidden": False}
    again = report(ben, comment_id, "Still rude.")
    assert again.status_code == 409 and "reported this comment already" in again.json()["detail"]
    assert seen(ben, comment_id)["reported"]
    assert "You reported this comment." in ben.get("/lessons/alpha").text


def test_who_cannot_report_and_which_reasons_are_refused(comment, client, signed_in_client, instructor_client):
    ann, comment_id = comment
    assert report(client, comment_id).status_code == 401
    own = report(ann, comment_id)
    assert own.status_code == 400 and "your own comment" in own.json()["detail"]
    assert not seen(ann, comment_id)["can_report"] and not seen(instructor_client, comment_id)["can_report"]
    ben = signed_in_client()
    assert report(ben, comment_id, "   ").status_code == 422
    assert report(ben, comment_id, "x" * 501).status_code == 422
    assert report(ben, 999).status_code == 404
    ann.delete(f"/api/comments/{comment_id}")
    assert report(ben, comment_id).status_code == 404


def test_enough_reports_hide_it_until_an_instructor_shows_it_again(comment, settings, signed_in_client,
                                                                  instructor_client, client):  # fmt: skip
    ann, comment_id = comment
    assert settings.comment_report_hide_at == 3
    reporters = [signed_in_client() for _ in range(3)]
    hidden = [report(b, comment_id, f"reason {i}").json()["hidden"] for i, b in enumerate(reporters)]
    assert hidden == [False, False, True]
    assert seen(client, comment_id) is None and seen(reporters[0], comment_id) is None
    assert seen(ann, comment_id)["hidden"]  # the author still sees it, marked hidden
    item = queue_item(instructor_client, comment_id)
    assert "hidden, awaiting review" in item and "3 open reports" in item
    assert all(f"reason {i}" in item for i in range(3))

    review(instructor_client, comment_id, "show")
    assert seen(client, comment_id) is not None and not seen(client, comment_id)["hidden"]
    assert queue_item(instructor_client, comment_id) is None  # reviewed: its reports are closed
    assert report(reporters[0], comment_id).status_code == 409  # once per person, even after a review
    newcomer = signed_in_client()
    assert report(newcomer, comment_id).json()["hidden"] is False  # counting starts again from zero
    item = queue_item(instructor_client, comment_id)
    assert "reported, still shown" in item and "1 open report" in item and "3 earlier reports closed" in item


def test_hide_and_delete_from_the_queue(comment, signed_in_client, instructor_client, client):
    ann, comment_id = comment
    report(signed_in_client(), comment_id)
    review(instructor_client, comment_id, "hide")
    assert seen(client, comment_id) is None
    item = queue_item(instructor_client, comment_id)
    assert "hidden by an instructor" in item and "open report" not in item
    review(instructor_client, comment_id, "delete")
    assert queue_item(instructor_client, comment_id) is None
    assert seen(ann, comment_id) is None


def test_hiding_from_the_lesson_page_is_a_review_too(comment, signed_in_client, instructor_client):
    _ann, comment_id = comment
    report(signed_in_client(), comment_id)
    assert instructor_client.post(f"/api/comments/{comment_id}/hide", json={"hidden": False}).status_code == 200
    assert queue_item(instructor_client, comment_id) is None


def test_the_threshold_is_a_setting(app, comment, signed_in_client, client):
    _ann, comment_id = comment
    app.state.settings = app.state.settings.model_copy(update={"comment_report_hide_at": 1})
    assert report(signed_in_client(), comment_id).json()["hidden"] is True
    assert seen(client, comment_id) is None


def test_reporting_without_javascript(comment, signed_in_client):
    _ann, comment_id = comment
    ben = signed_in_client()
    token = ben.headers.pop("X-CSRF-Token")
    page = ben.get("/lessons/alpha").text
    assert f'action="/comments/{comment_id}/report"' in page
    sent = ben.post(f"/comments/{comment_id}/report", data={"reason": "Spoils the exercise.", "csrf_token": token},
                    follow_redirects=False)  # fmt: skip
    assert sent.status_code == 303 and sent.headers["location"] == "/lessons/alpha#comments"
    again = ben.post(f"/comments/{comment_id}/report", data={"reason": "Again.", "csrf_token": token},
                     follow_redirects=False)  # fmt: skip
    assert again.status_code == 303 and "comment_error=You%20reported" in again.headers["location"]
    assert "You reported this comment." in ben.get("/lessons/alpha").text


def test_the_dashboard_counts_reports_per_lesson(comment, signed_in_client, instructor_client):
    _ann, comment_id = comment
    report(signed_in_client(), comment_id)
    page = instructor_client.get("/instructor").text
    row = page.split('href="/lessons/alpha"')[1].split("</tr>")[0]
    assert '<td>1</td><td>0</td><td><a href="/instructor/comments">1</a></td>' in row  # comments, hidden, reported
