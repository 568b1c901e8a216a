"""A class through the front door: a roster imported with `course users import` fills sections and makes a
teaching assistant, `course deadlines` sets deadlines, learners run code through the real sandbox, and then: a TA
sees and acts for their section only (403 on another section's learner), a late pass is flagged (never refused) in
the dashboard, the learner page and the CSV, the learner page searches, and the code export is a zip laid out for
a similarity checker."""

from __future__ import annotations

import csv
import io
import zipfile

import pytest
from click.testing import CliRunner
from sqlalchemy import select

from app import ROOT
from app.cli import main
from app.core.config import get_settings
from app.models import User
from tests.helpers import SECRET, TEST_PASSWORD, create_account, parse_sse

pytestmark = pytest.mark.slow

SAME = "same-device"
SOLUTION = (ROOT / "exercises" / SAME / "solution.py").read_text(encoding="utf-8")
WRONG = (ROOT / "exercises" / SAME / "wrong" / "placeholder_y.py").read_text(encoding="utf-8")
ROSTER = """email,name,section,role
ann@example.org,Ann,Lab A,learner
bob@example.org,Bob,Lab B,learner
tess@example.org,Tess,Lab A,ta
new@example.org,Newcomer,Lab A;Lab B,
"""


def course(app, *args: str) -> str:
    """Run a `course` command against the app's database; return its output (it must succeed)."""
    with pytest.MonkeyPatch.context() as env:
        for name, value in {"COURSE_ENV": "test", "COURSE_SECRET_KEY": SECRET,
                            "COURSE_DATABASE_URL": app.state.settings.database_url}.items():
            env.setenv(name, value)
        get_settings.cache_clear()
        try:
            result = CliRunner().invoke(main, list(args))
        finally:
            get_settings.cache_clear()
    assert result.exit_code == 0, result.output
    return result.output


def sign_in(app, email: str):
    browser = app.browsers.new()
    response = browser.post("/api/auth/login", json={"email": email, "password": TEST_PASSWORD})
    assert response.status_code == 200, response.text
    browser.headers["X-CSRF-Token"] = response.json()["csrf_token"]
    return browser


def run(browser, code: str) -> dict:
    response = browser.post(f"/api/exercises/{SAME}/submissions", json={"code": code})
    assert response.status_code == 202, response.text
    assert parse_sse(browser.get(response.json()["events"]).text)[-1][0] == "verdict"
    return browser.get(response.json()["url"]).json()


def learner_id(app, email: str) -> str:
    with app.state.db.session() as session:
        return session.scalar(select(User.learner_id).where(User.email == email))


@pytest.fixture(scope="module")
def klass(live_app, tmp_path_factory):
    for email, name in [("ann@example.org", "Ann"), ("bob@example.org", "Bob"), ("tess@example.org", "Tess")]:
        create_account(live_app, email, name=name)
    create_account(live_app, "ines@example.org", name="Ines", role="instructor")
    roster = tmp_path_factory.mktemp("roster") / "roster.csv"
    roster.write_text(ROSTER, encoding="utf-8")
    imported = course(live_app, "users", "import", str(roster))
    assert "1 new accounts, 1 made teaching assistants" in imported
    assert "section Lab A: 2 learners, 1 teaching assistants" in imported
    assert course(live_app, "users", "import", str(roster)).count("0 new accounts, 0 made") == 1  # idempotent
    course(live_app, "deadlines", "set", SAME, "2100-01-01T00:00")  # for everyone: far away
    course(live_app, "deadlines", "set", SAME, "2000-01-01 00:00", "--section", "Lab B")  # Lab B's: long past
    listed = course(live_app, "deadlines", "list")
    assert f"{SAME}\t(everyone)\t2100-01-01 00:00 UTC" in listed and f"{SAME}\tLab B\t2000-01-01 00:00 UTC" in listed
    ann, bob = sign_in(live_app, "ann@example.org"), sign_in(live_app, "bob@example.org")
    runs = {"ann": [run(ann, WRONG), run(ann, SOLUTION)], "bob": [run(bob, SOLUTION)]}
    assert [r["status"] for r in runs["ann"] + runs["bob"]] == ["failed", "passed", "passed"]
    return {"runs": runs, "ann": ann, "bob": bob, "tess": sign_in(live_app, "tess@example.org"),
            "ines": sign_in(live_app, "ines@example.org"),
            "ids": {who: learner_id(live_app, f"{who}@example.org") for who in ("ann", "bob", "new")}}


def test_a_ta_sees_and_acts_for_their_section_only(klass):
    tess, ids, runs = klass["tess"], klass["ids"], klass["runs"]
    found = {r["email"] for r in tess.get("/api/instructor/learners").json()}
    assert found == {"ann@example.org", "new@example.org"}  # Lab A's learners, not Bob, not herself
    assert tess.get(f"/api/instructor/learners/{ids['bob']}").status_code == 403
    assert tess.get(f"/instructor/learners/{ids['bob']}", headers={"accept": "text/html"}).status_code == 403
    assert tess.get(f"/api/submissions/{runs['bob'][0]['id']}").status_code == 404
    ann = tess.get(f"/api/instructor/learners/{ids['ann']}").json()
    assert ann["sections"] == ["Lab A"] and tess.get(f"/api/submissions/{runs['ann'][0]['id']}").status_code == 200
    assert tess.get("/api/instructor/exercises").status_code == 403  # the class's figures stay the instructor's
    names = zipfile.ZipFile(io.BytesIO(tess.get("/api/instructor/code.zip").content)).namelist()
    assert any(n.startswith(f"{SAME}/ann-") for n in names) and not any("bob-" in n for n in names)
    assert klass["ann"].get("/api/instructor/learners").status_code == 403  # a learner is no TA


def test_a_late_pass_is_flagged_in_the_dashboard_the_learner_page_and_the_csv(klass):
    ines, ids = klass["ines"], klass["ids"]
    rows = {(r["email"], r["exercise"]): r
            for r in csv.DictReader(io.StringIO(ines.get("/api/instructor/progress.csv").text))}
    bob, ann = rows[("bob@example.org", SAME)], rows[("ann@example.org", SAME)]
    assert (bob["passed"], bob["passed_late"], bob["sections"]) == ("yes", "yes", "Lab B")
    assert bob["deadline"].startswith("2000-01-01T00:00:00")
    assert (ann["passed"], ann["passed_late"], ann["deadline"][:10]) == ("yes", "no", "2100-01-01")
    assert rows[("new@example.org", SAME)]["sections"] == "Lab A; Lab B"
    figures = {f["slug"]: f for f in ines.get("/api/instructor/exercises").json()}
    assert figures[SAME]["late_passes"] == 1 and figures["pick-device"]["late_passes"] is None
    page = ines.get(f"/api/instructor/learners/{ids['bob']}").json()
    same = next(e for e in page["exercises"] if e["slug"] == SAME)
    assert same["passed_late"] and [a["late"] for a in same["attempts"]] == [True]


def test_the_learner_page_lists_attempts_with_code_and_checks_and_searches(klass, html_headers):
    ines, ids = klass["ines"], klass["ids"]
    assert [r["email"] for r in ines.get("/api/instructor/learners?q=BOB").json()] == ["bob@example.org"]
    page = ines.get(f"/api/instructor/learners/{ids['ann']}").json()
    same = next(e for e in page["exercises"] if e["slug"] == SAME)
    assert [a["status"] for a in same["attempts"]] == ["passed", "failed"]  # newest first
    assert same["attempts"][0]["code"] == SOLUTION and same["attempts"][1]["checks"]
    only = ines.get(f"/api/instructor/learners/{ids['ann']}", params={"q": "torch.zeros(3"}).json()
    same = next(e for e in only["exercises"] if e["slug"] == SAME)
    assert [a["status"] for a in same["attempts"]] == ["failed"]  # only the attempt whose code holds it
    html = ines.get(f"/instructor/learners/{ids['ann']}", headers=html_headers).text
    assert "Ann" in html and "x.to(device)" in html and 'class="badge status-failed"' in html


def test_the_code_export_is_one_folder_per_learner_and_exercise_with_the_starter_as_base(klass):
    ines = klass["ines"]
    response = ines.get(f"/api/instructor/code.zip?exercise={SAME}")
    assert response.status_code == 200 and response.headers["content-type"] == "application/zip"
    archive = zipfile.ZipFile(io.BytesIO(response.content))
    names = sorted(archive.namelist())
    ann = [n for n in names if n.startswith(f"{SAME}/ann-")]
    assert len(ann) == 1 and ann[0].endswith("/main.py") and archive.read(ann[0]).decode() == SOLUTION  # her last
    assert any(n.startswith(f"{SAME}/bob-") for n in names)
    assert archive.read(f"base/{SAME}/main.py").decode() == (ROOT / "exercises" / SAME / "starter.py").read_text()
    assert "README.txt" in names and not any(n.startswith("pick-device/") for n in names)
    assert ines.get("/api/instructor/code.zip?exercise=nope").status_code == 404
