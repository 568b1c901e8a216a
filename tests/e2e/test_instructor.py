"""The instructor pages in Debian's Chromium: the dashboard with a class's real submissions, an exercise's page
and its Regrade button (through the sandbox, with the progress bar), and the moderation queue after learners
reported a comment through the page. Each page is checked with axe (no serious or critical violation), light and
dark, at 1280 and 360 px; screenshots go to tests/artifacts/ (gitignored)."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import expect

from app import ROOT
from tests.helpers import ARTIFACTS, TEST_PASSWORD, create_account, parse_sse, serious_violations

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SAME_DEVICE = ROOT / "exercises" / "same-device"
PROGRAMS = {"solution": (SAME_DEVICE / "solution.py").read_text(),
            "starter": (SAME_DEVICE / "wrong" / "unchanged_starter.py").read_text(),
            "placeholder": (SAME_DEVICE / "wrong" / "placeholder_y.py").read_text()}


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"instructor-{name}.png"), full_page=True)


def api_learner(base: str, email: str, name: str, app) -> httpx.Client:
    """A learner with an account, driving the JSON API as the page's scripts do."""
    create_account(app, email, name=name)
    client = httpx.Client(base_url=base, timeout=120)
    client.headers["X-CSRF-Token"] = client.get("/api/auth/csrf").json()["csrf_token"]
    response = client.post("/api/auth/login", json={"email": email, "password": TEST_PASSWORD})
    client.headers["X-CSRF-Token"] = response.json()["csrf_token"]
    return client


def submit(client: httpx.Client, code: str) -> None:
    response = client.post("/api/exercises/same-device/submissions", json={"code": code})
    assert response.status_code == 202, response.text
    assert parse_sse(client.get(response.json()["events"]).text)[-1][0] == "verdict"


@pytest.fixture(scope="module")
def site(live_site):
    """The live site with a class: three learners' runs through the sandbox and a comment under lesson one."""
    app = live_site.app
    learners = [api_learner(live_site.url, f"l{i}@example.org", name, app)
                for i, name in enumerate(["Ada", "Bo", "Cy", "Di"])]
    for learner, runs in zip(learners, [["starter", "solution"], ["solution"], ["placeholder", "placeholder"], []]):
        for run in runs:
            submit(learner, PROGRAMS[run])
    comment = learners[0].post("/api/lessons/cpu-gpu-border/comments",
                               json={"body": "The answer is `x = x.to(device)`, just copy it."}).json()["id"]
    create_account(app, "ines@example.org", name="Ines", role="instructor")
    yield live_site.url, learners, comment
    for learner in learners:
        learner.close()


def log_in(page, base: str, email: str, next_path: str) -> None:
    page.goto(f"{base}/login?next={next_path}")
    page.fill("#email", email)
    page.fill("#password", TEST_PASSWORD)
    with page.expect_navigation():
        page.click("form.auth-form button[type=submit]")
    assert page.url == f"{base}{next_path}"


def test_dashboard_exercise_page_and_regrade(site, browser_page):
    base, _learners, _comment = site
    page = browser_page
    log_in(page, base, "ines@example.org", "/instructor")
    expect(page.locator("h1")).to_have_text("Instructor dashboard")
    card = page.locator("section.exercise-card").filter(has=page.locator("#card-same-device"))
    figures = card.locator(".figures").inner_text()
    assert "Learners who tried\n3" in figures and "Passed\n2" in figures and "Pass rate\n67 %" in figures
    expect(card.locator(".counts li").first).to_contain_text("y_value")
    assert serious_violations(page) == []
    shot(page, "dashboard")

    card.locator("h3 a").click()
    page.wait_for_url("**/instructor/exercises/same-device")
    assert page.locator("li.submission").count() == 5
    page.select_option("#check-filter", "y_value")
    with page.expect_navigation():
        page.click(".filter-form button[type=submit]")
    assert page.locator("li.submission").count() == 2
    page.locator("li.submission details summary").first.click()
    expect(page.locator("li.submission .submission-code").first).to_contain_text("torch.zeros(3, device=device)")
    assert serious_violations(page) == []
    shot(page, "exercise")

    with page.expect_navigation():
        page.click(".regrade-form button[type=submit]")
    # instructor.js follows the progress bar and reloads the page when the regrade is done
    expect(page.locator(".regrade-finished")).to_contain_text("5 of 5 graded · 0 changed", timeout=120_000)
    expect(page.locator("li.submission .history").first).to_contain_text("regrade #1")
    assert serious_violations(page) == []
    shot(page, "regraded")
    assert page.console_errors == []


def test_reports_through_the_page_and_the_moderation_queue(site, chromium, browser_page):
    base, learners, comment = site
    reporter = chromium.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = reporter.new_page()
        log_in(page, base, "l1@example.org", "/lessons/cpu-gpu-border")
        article = page.locator(f"#comment-{comment}")
        article.locator(".report-form summary").click()
        article.locator(".report-form textarea").fill("Gives the answer away.")
        article.locator(".report-form button[type=submit]").click()
        expect(page.locator(f"#comment-{comment} .comment-reported")).to_have_text("You reported this comment.")
        assert serious_violations(page) == []
        ARTIFACTS.mkdir(exist_ok=True)
        page.locator("#comments").screenshot(path=str(ARTIFACTS / "instructor-reported.png"))
    finally:
        reporter.close()
    for learner in learners[2:]:  # two more reports reach COURSE_COMMENT_REPORT_HIDE_AT (3): hidden
        assert learner.post(f"/api/comments/{comment}/report", json={"reason": "Spoiler."}).status_code == 201

    page = browser_page
    page.on("dialog", lambda dialog: dialog.accept())
    log_in(page, base, "ines@example.org", "/instructor/comments")
    item = page.locator(f"#queue-{comment}")
    expect(item.locator(".badge-warn")).to_have_text("hidden, awaiting review")
    expect(item.locator(".queue-reports li")).to_have_count(3)
    assert "Gives the answer away." in item.inner_text()
    assert serious_violations(page) == []
    shot(page, "queue")

    with page.expect_navigation():
        item.get_by_role("button", name="Show to learners").click()
    expect(page.locator(f"#queue-{comment}")).to_have_count(0)
    expect(page.locator(".instructor-page")).to_contain_text("Nothing to review")
    assert httpx.get(f"{base}/api/lessons/cpu-gpu-border/comments").json()["count"] == 1  # learners see it again
    assert page.console_errors == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_instructor_pages_are_accessible_and_fit_360px(site, chromium, scheme):
    base, _learners, _comment = site
    context = chromium.new_context(viewport={"width": 360, "height": 780}, color_scheme=scheme)
    page = context.new_page()
    try:
        log_in(page, base, "ines@example.org", "/instructor")
        for path in ["/instructor", "/instructor/exercises/same-device", "/instructor/comments"]:
            page.goto(base + path)
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= 360, f"{path} is {width}px wide at a 360px viewport"
            assert serious_violations(page) == [], path
        page.goto(base + "/instructor/exercises/same-device")
        shot(page, f"exercise-360-{scheme}")
    finally:
        context.close()
