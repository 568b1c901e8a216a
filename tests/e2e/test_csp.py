"""The Content-Security-Policy in Debian's Chromium: a learner walks the site (index, a lesson with a run, comments,
log-in, progress, the account page) and the API explorers open, and the browser reports no violation.

Chromium reports each blocked script, style, image or connection on the console ("Refused to ... because it
violates the following Content Security Policy directive"); `browser_page` collects console errors, and each
page also counts `securitypolicyviolation` events, which catch what the console might word differently.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from app.web.middleware.headers import CSP

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LESSON = "cpu-gpu-border"
EXERCISE = "same-device"
PASSWORD = "a long enough password"
# runs before any page script: counts what the policy blocked on this page
COUNT_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation",
  (e) => window.__cspViolations.push(e.violatedDirective + " " + (e.blockedURI || "inline")));
"""


@pytest.fixture
def page(browser_page):
    browser_page.context.add_init_script(COUNT_VIOLATIONS)
    return browser_page


# ReDoc's "powered by" logo comes from its CDN; the policy blocks it and ReDoc then hides it (docs/security.md)
REDOC_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"


def violations(page, allowed: str = "\x00") -> list[str]:
    """Return what the policy blocked on the current page, from the DOM events and the console."""
    blocked = page.evaluate("window.__cspViolations")
    messages = [e for e in page.console_errors if "Content Security Policy" in e or "Permissions" in e]
    return [each for each in blocked + messages if allowed not in each]


def visit(page, url: str) -> None:
    response = page.goto(url)
    nonce = re.search(r"'nonce-([^']+)'", response.headers["content-security-policy"]).group(1)
    assert response.headers["content-security-policy"] == CSP.format(nonce=nonce), url
    assert violations(page) == [], url


def test_a_learner_walks_the_site_without_a_csp_violation(live_site, page):
    base = live_site.url
    visit(page, f"{base}/")
    expect(page.locator(".lesson-list")).to_be_visible()

    visit(page, f"{base}/lessons/{LESSON}")
    panel = page.locator(f"#exercise-{EXERCISE}")
    expect(panel.locator(".cm-editor")).to_be_visible()  # the editor bundle ran and styled itself
    panel.locator(".exercise-run").click()
    expect(panel.locator(".exercise-checks .check").first).to_be_visible(timeout=20_000)  # SSE streamed a verdict
    assert violations(page) == []

    visit(page, f"{base}/signup?next=/lessons/{LESSON}")
    page.fill("#display_name", "Cass")
    page.fill("#email", "cass@example.org")
    page.fill("#password", PASSWORD)
    with page.expect_navigation():
        page.click("form.auth-form button[type=submit]")
    page.fill("#comment-body", "Does **this** run on `cuda:0`?")
    page.click(".comment-form button[type=submit]")  # comments.js posts with X-CSRF-Token, then reloads
    expect(page.locator("#comments .comment")).to_have_count(1)
    assert violations(page) == []

    with page.expect_navigation():
        page.click(".account-nav button[type=submit]")  # log out
    visit(page, f"{base}/login?next=/progress")
    page.fill("#email", "cass@example.org")
    page.fill("#password", PASSWORD)
    with page.expect_navigation():
        page.click("form.auth-form button[type=submit]")
    assert page.url == f"{base}/progress"
    assert violations(page) == []

    visit(page, f"{base}/account")
    page.fill("#display_name", "Cassandra")
    with page.expect_navigation():
        page.click("#profile button[type=submit]")
    expect(page.locator(".form-notice")).to_contain_text("display name is changed")
    assert violations(page) == []
    assert page.console_errors == []


def test_the_api_explorers_work_offline_within_their_policy(live_site, page):
    page.goto(f"{live_site.url}/docs")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Devices and Tensor Placement", timeout=20_000)
    expect(page.locator(".opblock-tag-section").first).to_be_visible()
    assert violations(page) == []

    page.goto(f"{live_site.url}/redoc")
    expect(page.locator("h1").first).to_contain_text("Devices and Tensor Placement", timeout=20_000)
    page.fill("input[placeholder='Search...']", "password")  # the search index runs in a blob: worker
    expect(page.locator("[data-role='search:results']").first).to_be_visible()
    assert violations(page, allowed=REDOC_LOGO) == []
