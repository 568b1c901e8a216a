"""Comments and progress in Debian's Chromium: XSS payloads posted through the page run nothing; the page's
scripts send the CSRF header; a refusal shows in place; the read beacon fires at the end of the lesson."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.web.xss_payloads import PAYLOADS

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.small_course]

INJECTED = "#comments script, #comments img, #comments svg, #comments iframe, #comments style, #comments [onerror]," \
           " #comments [onload], #comments [onmouseover], #comments [ontoggle], #comments .comment-body details," \
           " #comments a[href^='javascript'], #comments a[href^='data'], #xss-div"  # fmt: skip


@pytest.fixture
def settings(settings):
    # every payload is posted from one learner within a minute: the comment limits are not what this tests
    return settings.model_copy(update={"comment_max_chars": 2000, "comment_rate_limit": "1000/minute",
                                       "comment_address_rate_limit": "1000/minute"})


def sign_up(page, base: str) -> None:
    page.goto(f"{base}/signup?next=/lessons/alpha")
    page.fill("#display_name", "Mallory")
    page.fill("#email", "mallory@example.org")
    page.fill("#password", "a long enough password")
    with page.expect_navigation():
        page.click("form.auth-form button[type=submit]")
    assert page.url == f"{base}/lessons/alpha"


def no_script_ran(page, dialogs: list[str]) -> None:
    assert dialogs == []
    assert page.console_errors == []
    assert page.evaluate("window.__xss") is None
    assert page.locator(INJECTED).count() == 0


def test_xss_payloads_posted_through_the_page_run_nothing(live_server, browser_page):
    page = browser_page
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    sign_up(page, live_server)
    assert page.locator(".comments-empty").inner_text().startswith("No comments yet")

    for n, payload in enumerate(PAYLOADS, start=1):
        page.fill("#comment-body", payload)
        page.click(".comment-form button[type=submit]")  # comments.js: POST /api/... with X-CSRF-Token, reload
        expect(page.locator("#comments .comment")).to_have_count(n)
        page.wait_for_load_state()
        page.hover("#comments .comment-thread:last-child .comment-body")
        no_script_ran(page, dialogs)

    assert page.locator(".comment-count").inner_text() == f"({len(PAYLOADS)})"
    page.reload()
    no_script_ran(page, dialogs)

    # editing swaps in the server's sanitised HTML without a reload: still inert
    first = page.locator("#comments .comment").first
    first.locator("button[data-action=edit]").click()
    first.locator(".comment-edit-form textarea").fill("<img src=x onerror=alert('edit')> **edited**")
    first.locator(".comment-edit-form button[type=submit]").click()
    page.wait_for_selector("#comments .comment >> nth=0 >> .comment-edited")
    assert "edited" in first.locator(".comment-body strong").inner_text()
    no_script_ran(page, dialogs)


def test_a_too_long_comment_is_refused_in_place_keeping_the_text(live_server, browser_page):
    page = browser_page
    sign_up(page, live_server)
    page.fill("#comment-body", "x" * 2001)
    page.click(".comment-form button[type=submit]")
    error = page.locator("#comments .js-error")
    error.wait_for(state="visible")
    assert "the limit is 2,000" in error.inner_text() and "Shorten it by 1 character" in error.inner_text()
    assert len(page.input_value("#comment-body")) == 2001
    page.console_errors.clear()  # the refused request itself is logged by Chromium as a failed resource


def test_reaching_the_end_of_a_lesson_marks_it_read(live_server, browser_page):
    page = browser_page
    page.set_viewport_size({"width": 1280, "height": 400})
    page.goto(f"{live_server}/lessons/alpha")
    assert "Not marked as read yet." in page.locator("#lesson-progress").inner_text()
    page.locator("#lesson-progress").scroll_into_view_if_needed()
    page.wait_for_selector("#lesson-progress[data-read=true]")
    assert "You have read this lesson." in page.locator("#lesson-progress").inner_text()
    page.goto(f"{live_server}/progress")
    assert "Lessons read: 1 of 2" in page.locator("main").inner_text()
    assert page.console_errors == []
