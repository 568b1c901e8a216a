"""The instructor dashboard over HTTP, against the real app, a real SQLite file and the real sandbox: four learners
submit code to two exercises through the API, and every figure the dashboard shows is checked against what they
submitted."""

from __future__ import annotations

import csv
import io
import time
from datetime import datetime
from urllib.parse import unquote

import pytest

from app import ROOT
from app.web.templating import duration_filter
from tests.helpers import TEST_PASSWORD, create_account, parse_sse

pytestmark = pytest.mark.slow

SOLUTION = (ROOT / "exercises" / "same-device" / "solution.py").read_text()
STARTER = (ROOT / "exercises" / "same-device" / "wrong" / "unchanged_starter.py").read_text()
PLACEHOLDER = (ROOT / "exercises" / "same-device" / "wrong" / "placeholder_y.py").read_text()
PICK_SOLUTION = (ROOT / "exercises" / "pick-device" / "solution.py").read_text()
PICK_WRONG = (ROOT / "exercises" / "pick-device" / "wrong" / "more_than_one_gpu.py").read_text()
# a display name a spreadsheet would run as a formula
FORMULA_NAME = "=HYPERLINK(\"http://x\")"


def sign_in(app, email: str, name: str, role: str = "learner"):
    """A new browser on the shared app, signed in to a new account."""
    create_account(app, email, name=name, role=role)
    browser = app.browsers.new()
    response = browser.post("/api/auth/login", json={"email": email, "password": TEST_PASSWORD})
    assert response.status_code == 200, response.text
    browser.headers["X-CSRF-Token"] = response.json()["csrf_token"]
    return browser


def submit(browser, slug: str, code: str) -> dict:
    """Run code through the sandbox as the page does; return the stored submission once it has its verdict."""
    response = browser.post(f"/api/exercises/{slug}/submissions", json={"code": code})
    assert response.status_code == 202, response.text
    events = parse_sse(browser.get(response.json()["events"]).text)
    assert events[-1][0] == "verdict"
    return browser.get(response.json()["url"]).json()


@pytest.fixture(scope="module")
def classroom(live_app):
    """Ann fails then passes same-device, Ben passes at once, Cam (anonymous) fails it twice with a placeholder,
    and Dee (anonymous) fails then passes pick-device. Two read the first lesson; Ann comments on it. Ines, the
    instructor, tries pick-device and reads the lesson too: an instructor is no learner in the figures."""
    ann = sign_in(live_app, "ann@example.org", "Ann")
    ben = sign_in(live_app, "ben@example.org", FORMULA_NAME)
    cam, dee = live_app.browsers.new(), live_app.browsers.new()
    runs = {
        "ann": [submit(ann, "same-device", STARTER), submit(ann, "same-device", SOLUTION)],
        "ben": [submit(ben, "same-device", SOLUTION)],
        "cam": [submit(cam, "same-device", PLACEHOLDER), submit(cam, "same-device", PLACEHOLDER)],
        "dee": [submit(dee, "pick-device", PICK_WRONG), submit(dee, "pick-device", PICK_SOLUTION)],
    }
    assert [[r["status"] for r in rs] for rs in runs.values()] == [["failed", "passed"], ["passed"],
                                                                  ["failed", "failed"], ["failed", "passed"]]
    for browser in (ann, cam):
        assert browser.post("/api/lessons/cpu-gpu-border/read").status_code == 200
    assert ann.post("/api/lessons/cpu-gpu-border/comments", json={"body": "Why .to()?"}).status_code == 201
    instructor = sign_in(live_app, "ines@example.org", "Ines", role="instructor")
    assert submit(instructor, "pick-device", PICK_WRONG)["status"] == "failed"
    assert instructor.post("/api/lessons/cpu-gpu-border/read").status_code == 200
    return {"runs": runs, "instructor": instructor, "learners": {"ann": ann, "ben": ben, "cam": cam, "dee": dee}}


def seconds_between(first: dict, then: dict) -> float:
    return (datetime.fromisoformat(then["created_at"]) - datetime.fromisoformat(first["created_at"])).total_seconds()


def test_the_json_figures_match_what_was_submitted(classroom):
    figures = {f["slug"]: f for f in classroom["instructor"].get("/api/instructor/exercises").json()}
    assert list(figures) == ["same-device", "bring-it-back", "pick-device", "runs-on-a-mac", "model-internals",
                             "training-loop", "fast-loop", "fits-on-one-gpu", "ddp-training", "two-machines",
                             "accelerate-loop"]  # in course order
    assert figures["same-device"] == {
        "slug": "same-device", "learners": 3, "passed_learners": 2, "pass_rate": 0.6667, "attempts": 5,
        "median_attempts_to_pass": 1.5,  # Ann 2, Ben 1
        # Cam's first placeholder; his second (a repeat) and Ann's unchanged starter ran nothing new: counted apart
        "failing_checks": {"y_value": 1}, "uncounted_failures": {"repeat": 1, "starter": 1},
        "passed_after_seeing_solution": 0, "late_passes": None}
    assert figures["pick-device"] == {
        "slug": "pick-device", "learners": 1, "passed_learners": 1, "pass_rate": 1.0, "attempts": 2,
        "median_attempts_to_pass": 2, "failing_checks": {"prefers_cuda": 1}, "uncounted_failures": {},
        "passed_after_seeing_solution": 0, "late_passes": None}
    assert figures["training-loop"] == {
        "slug": "training-loop", "learners": 0, "passed_learners": 0, "pass_rate": None, "attempts": 0,
        "median_attempts_to_pass": None, "failing_checks": {}, "uncounted_failures": {},
        "passed_after_seeing_solution": 0, "late_passes": None}


def test_the_dashboard_page_shows_times_exceptions_and_lessons(classroom, html_headers):
    page = classroom["instructor"].get("/instructor", headers=html_headers)
    assert page.status_code == 200
    same = page.text.split('id="card-same-device"')[1].split('id="card-')[0]
    ann = classroom["runs"]["ann"]
    median = seconds_between(ann[0], ann[1]) / 2  # the middle of Ann's wait for her pass and Ben's none
    assert f"<dt>Median time to pass</dt><dd>{duration_filter(median)}</dd>" in same
    assert "<dt>Pass rate</dt><dd>67 %</dd>" in same
    assert "RuntimeError: Expected all tensors to be on the same device" in same  # Ann's starter raised it
    assert '<span class="count">1</span>' in same.split("RuntimeError: Expected all tensors")[1]
    assert 'href="/instructor/exercises/same-device?check=y_value#submissions"' in same
    lessons = page.text.split('id="lessons"')[1]
    row = lessons.split('href="/lessons/cpu-gpu-border"')[1].split("</tr>")[0]
    assert "<td>2</td><td>1</td><td>0</td>" in row  # readers, comments, hidden


def test_recent_submissions_newest_first_with_code_and_a_check_filter(classroom, html_headers):
    instructor = classroom["instructor"]
    page = instructor.get("/instructor/exercises/same-device", headers=html_headers).text
    ids = [chunk.split('"')[0] for chunk in page.split('id="submission-')[1:]]
    runs = classroom["runs"]
    newest_first = sorted([r for who in ("ann", "ben", "cam") for r in runs[who]], key=lambda r: r["created_at"],
                          reverse=True)
    assert ids == [r["id"] for r in newest_first]
    assert "Ann &lt;ann@example.org&gt;" in page and "torch.zeros(3, device=device)" in page
    submissions = page.split('id="submissions"')[1]
    assert "<code>x</code>" in submissions and "`x`" not in submissions  # check messages quote code as code
    filtered = instructor.get("/instructor/exercises/same-device?check=y_value", headers=html_headers).text
    ids = [chunk.split('"')[0] for chunk in filtered.split('id="submission-')[1:]]
    assert ids == [r["id"] for r in reversed(runs["cam"])]
    assert filtered.count("✗") >= 2 and "x.to(device)" not in filtered.split('id="submissions"')[1]


def test_the_progress_export_has_one_row_per_learner_and_exercise(classroom):
    response = classroom["instructor"].get("/api/instructor/progress.csv")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/csv")
    assert response.headers["content-disposition"].startswith('attachment; filename="progress-')
    rows = list(csv.DictReader(io.StringIO(response.text)))
    learners = {(row["learner_id"], row["email"]) for row in rows}
    assert len(learners) == 4  # Ann, Ben (accounts), Cam and Dee (anonymous, with attempts); not Ines
    slugs = {p.name for p in (ROOT / "exercises").iterdir() if (p / "exercise.yaml").is_file()}  # every exercise
    assert len(rows) == 4 * len(slugs) and {row["exercise"] for row in rows} == slugs
    mine = {(row["email"] or row["learner_id"], row["exercise"]): row for row in rows}
    ann = mine[("ann@example.org", "same-device")]
    assert (ann["attempts"], ann["passed"], ann["passes_current_checks"], ann["lesson"]) == ("2", "yes", "yes",
                                                                                              "cpu-gpu-border")
    assert ann["passed_at"] and ann["first_attempt_at"] <= ann["passed_at"]
    cam_id = classroom["learners"]["cam"].get("/api/me").json()["learner_id"]
    cam = mine[(cam_id, "same-device")]
    assert (cam["attempts"], cam["passed"], cam["name"], cam["email"]) == ("2", "no", "", "")
    ben = mine[("ben@example.org", "same-device")]
    assert ben["name"] == "'" + FORMULA_NAME  # text to a spreadsheet, never a formula
    assert '"\'=HYPERLINK(""http://x"")"' in response.text  # every cell quoted: no locale's separator splits one


def wait_for(instructor, regrade_id: int) -> dict:
    """Poll a regrade as the page's script does, until it is no longer running."""
    deadline = time.monotonic() + 300  # seconds; generous for a loaded machine, never a measurement
    while time.monotonic() < deadline:
        regrade = instructor.get(f"/api/instructor/regrades/{regrade_id}").json()
        if regrade["status"] != "running":
            return regrade
        time.sleep(0.1)
    raise AssertionError(f"regrade {regrade_id} still running: {regrade}")


def test_the_regrade_button_runs_every_stored_submission_again(classroom, html_headers):
    instructor = classroom["instructor"]
    page = instructor.get("/instructor/exercises/same-device", headers=html_headers).text
    assert "Regrade 5 stored submissions" in page and "never takes one away" in page
    sent = instructor.post("/instructor/exercises/same-device/regrade", data={"since": ""}, follow_redirects=False)
    assert sent.status_code == 303 and sent.headers["location"] == "/instructor/exercises/same-device#regrade"
    regrade = wait_for(instructor, 1)
    assert {k: regrade[k] for k in ("exercise", "status", "total", "done", "changed", "errors", "passes_added",
                                    "passes_kept")} == {"exercise": "same-device", "status": "finished", "total": 5,
                                                        "done": 5, "changed": 0, "errors": 0, "passes_added": 0,
                                                        "passes_kept": 0}  # fmt: skip
    page = instructor.get("/instructor/exercises/same-device", headers=html_headers).text
    assert "Regrade #1" in page and "5 of 5 graded · 0 changed" in page
    assert page.count("regrade #1") == 5  # every submission's history: its run, then the regrade
    figures = {f["slug"]: f for f in instructor.get("/api/instructor/exercises").json()}["same-device"]
    assert (figures["passed_learners"], figures["attempts"]) == (2, 5)  # the checks did not change


def test_the_regrade_api_and_its_refusals(classroom, live_app):
    from app.models import Regrade

    instructor = classroom["instructor"]
    started = instructor.post("/api/instructor/exercises/pick-device/regrades", json={"since": "2999-01-01"})
    assert started.status_code == 202 and started.json()["total"] == 0
    assert wait_for(instructor, started.json()["id"])["status"] == "finished"
    bad = instructor.post("/instructor/exercises/pick-device/regrade", data={"since": "March"}, follow_redirects=False)
    assert "regrade_error=" in bad.headers["location"] and "YYYY-MM-DD" in unquote(bad.headers["location"])
    from app.submissions.leases import db_clock

    with live_app.state.db.session(write=True) as session, session.begin():  # held by a live process elsewhere
        session.add(Regrade(exercise_slug="bring-it-back", status="running", total=3, holder="web-2:17:abc",
                            heartbeat_at=db_clock()))
    busy = instructor.post("/api/instructor/exercises/bring-it-back/regrades", json={})
    assert busy.status_code == 409 and "already running" in busy.json()["detail"]
    assert instructor.post("/api/instructor/exercises/no-such/regrades", json={}).status_code == 404
