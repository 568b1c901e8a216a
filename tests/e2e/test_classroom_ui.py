"""A class in Debian's Chromium: a learner opens a hint and, once it is open to her, the reference solution (each
look recorded by the server), and her teaching assistant finds her on the Learners page, searches her attempts,
and sees the late flag, the look at the solution before passing, and her code; the TA is refused another
section's learner. axe finds no serious or critical violation on the TA's pages."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from app import ROOT
from app.learning import deadlines, sections
from app.models import User
from tests.helpers import ARTIFACTS, TEST_PASSWORD, create_account, parse_sse, serious_violations

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SAME = ROOT / "exercises" / "same-device"
SOLUTION = (SAME / "solution.py").read_text()
WRONG = (SAME / "wrong" / "placeholder_y.py").read_text()


def api_learner(base: str, email: str, name: str, app, role: str = "learner") -> httpx.Client:
    create_account(app, email, name=name, role=role)
    client = httpx.Client(base_url=base, timeout=120)
    client.headers["X-CSRF-Token"] = client.get("/api/auth/csrf").json()["csrf_token"]
    response = client.post("/api/auth/login", json={"email": email, "password": TEST_PASSWORD})
    client.headers["X-CSRF-Token"] = response.json()["csrf_token"]
    return client


def submit(client: httpx.Client, code: str) -> None:
    response = client.post("/api/exercises/same-device/submissions", json={"code": code})
    assert response.status_code == 202, response.text
    assert parse_sse(client.get(response.json()["events"]).text)[-1][0] == "verdict"


def log_in(page, base: str, email: str, next_path: str) -> None:
    page.goto(f"{base}/login?next={next_path}")
    page.fill("#email", email)
    page.fill("#password", TEST_PASSWORD)
    with page.expect_navigation():
        page.click("form.auth-form button[type=submit]")


@pytest.fixture(scope="module")
def site(live_site):
    """Ann (Lab A, a deadline long past) fails five times with new code each time; Bob is in Lab B; Tess assists
    Lab A."""
    app = live_site.app
    ann = api_learner(live_site.url, "ann@example.org", "Ann", app)
    bob = api_learner(live_site.url, "bob@example.org", "Bob", app)
    create_account(app, "tess@example.org", name="Tess", role="ta")
    with app.state.db.session(write=True) as session:
        ids = dict(session.execute(select(User.email, User.learner_id)).all())
        sections.set_members(session, "Lab A", [ids["ann@example.org"]])
        sections.set_members(session, "Lab A", [ids["tess@example.org"]], role="ta")
        sections.set_members(session, "Lab B", [ids["bob@example.org"]])
        deadlines.set_deadline(session, exercise_slug="same-device", due_at=datetime(2001, 1, 1, tzinfo=UTC),
                               section="Lab A")
        session.commit()
    for attempt in range(5):
        submit(ann, WRONG + f"\nattempt = {attempt}\n")
    submit(bob, SOLUTION)
    yield live_site.url, ids
    ann.close()
    bob.close()


def test_a_learner_s_looks_are_recorded_and_her_ta_sees_them_on_her_page(site, browser_page):
    base, ids = site
    page = browser_page
    log_in(page, base, "ann@example.org", "/lessons/cpu-gpu-border")
    page.goto(f"{base}/lessons/cpu-gpu-border#exercise-same-device")
    panel = page.locator("#exercise-same-device")
    expect(panel.locator(".cm-editor")).to_be_visible()
    panel.locator(".exercise-hint-next").click()
    expect(panel.locator(".exercise-hints > li").first).to_be_visible()
    solution = panel.locator(".exercise-solution")
    expect(solution).to_be_visible()  # five counted failures opened it; its code comes only when she opens it
    expect(solution.locator(".highlight")).to_have_count(0)
    solution.locator("summary").click()
    expect(solution.locator(".highlight .k").first).to_be_visible()
    assert page.console_errors == []

    page.context.clear_cookies()
    log_in(page, base, "tess@example.org", "/instructor/learners")
    expect(page.locator("h1")).to_have_text("Learners")
    page.fill("#learner-q", "ann")
    page.locator("form.learner-search button").click()
    expect(page.locator(".learner-results tbody tr")).to_have_count(1)
    assert serious_violations(page) == []
    page.locator(".learner-results a", has_text="Ann").click()
    expect(page.locator("h1.learner-name")).to_contain_text("Ann")
    row = page.locator("#row-same-device")
    expect(row.locator(".badge.solution-first")).to_have_text("before passing")
    expect(page.locator("#exercise-same-device .submission")).to_have_count(5)
    expect(page.locator("#exercise-same-device .badge.late").first).to_be_visible()  # after Lab A's deadline
    looks = page.locator(".learner-looks").inner_text()
    assert "hint 1" in looks and "the reference solution" in looks
    page.fill("#code-q", "attempt = 3")
    page.locator("form.learner-search button").click()
    expect(page.locator("#exercise-same-device .submission")).to_have_count(1)
    assert serious_violations(page) == []
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "classroom-learner-page.png"), full_page=True)

    refused = page.goto(f"{base}/instructor/learners/{ids['bob@example.org']}")
    assert refused.status == 403
    expect(page.locator("body")).to_contain_text("not in a section you assist")
    assert page.console_errors == [] or all("403" in e for e in page.console_errors)
