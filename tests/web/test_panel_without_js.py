"""The lesson page as the server renders it (what a browser without JavaScript shows): the last run's output with
folded frames, the placement map as a table, checks that say what they check or that they were not reached; the
table of contents with the exercises; link notes in Markdown; and the sign-out answers that clear the browser's
copies (issues 16 and 19)."""

from __future__ import annotations

import re

from app import ROOT
from app.web.templating import status_where

LESSON = "/lessons/training-loop"


def form_run(learner, slug: str, code: str) -> str:
    """Run code through the no-JavaScript form; return the lesson page it comes back to."""
    token = learner.headers["X-CSRF-Token"]
    response = learner.post(f"/exercises/{slug}/run", data={"code": code, "csrf_token": token},
                            follow_redirects=False)
    assert response.status_code == 303, response.text
    page = learner.get(response.headers["location"].split("#")[0], headers={"accept": "text/html"}).text
    return page[page.index(f'id="exercise-{slug}"'):]


def test_the_panel_shows_folded_frames_the_placement_table_and_every_kind_of_check(learner):
    code = (ROOT / "exercises" / "training-loop" / "wrong" / "batch_not_moved.py").read_text(encoding="utf-8")
    panel = form_run(learner, "training-loop", code)
    assert re.search(r'<details class="frames"><summary class="line stderr">… \d+ frames inside torch …</summary>',
                     panel)
    assert 'class="line stderr learner-frame">  File &#34;main.py&#34;, line 20' in panel
    table = panel[panel.index('class="placement-table"'):panel.index("</table>", panel.index("placement-table"))]
    assert table.count("<tr class=") == 2 and 'class="placement-mismatch"' in table
    assert "tensors on cpu and cuda:0 met in one operation" in table
    assert '<li class="check passed" data-check="picks_device">' in panel
    assert "never hard-coded, so the script also runs without a GPU" in panel  # the description, not a bare tick
    assert '<li class="check unreached" data-check="trains">' in panel and 'aria-label="not reached"' in panel


def test_a_run_that_prints_nothing_says_so(learner):
    panel = form_run(learner, "training-loop", "x = 1\n")
    assert "The program printed nothing." in panel
    assert 'class="exercise-output has-run"' in panel  # the placeholder is for a panel that never ran


def test_on_this_page_lists_the_exercises_and_link_notes_render_markdown(site_client):
    page = site_client.get("/lessons/cpu-gpu-border", headers={"accept": "text/html"}).text
    toc = page[page.index('id="toc"'):page.index("</nav>", page.index('id="toc"'))]
    assert '<a href="#exercise-same-device">Exercise: ' in toc and '<a href="#exercise-bring-it-back">' in toc
    links = page[page.index('id="external-links"'):]
    assert "<code>type:index</code>" in links and "`type:index`" not in links


def test_sign_up_errors_name_the_field_in_words(site_client):
    token = site_client.get("/api/auth/csrf").json()["csrf_token"]
    page = site_client.post("/signup", data={"display_name": "Ann", "email": "not-an-address", "password": "x" * 12,
                                             "csrf_token": token}).text
    assert "Value error" not in page and "email: " not in page
    assert re.search(r"Email: [a-z][^<]*\.", page), page[page.index("form-errors"):][:300]


def test_every_sign_out_tells_the_browser_to_forget_its_copies(make_client):
    browser = make_client()
    assert "clear-site-data" not in browser.get("/").headers
    api = browser.post("/api/auth/logout")
    assert api.status_code == 200 and api.headers["clear-site-data"] == '"storage"'
    browser.headers["X-CSRF-Token"] = api.json()["csrf_token"]  # a sign-out gives a new token
    form = browser.post("/logout", follow_redirects=False)
    assert form.status_code == 303 and form.headers["clear-site-data"] == '"storage"'
    assert "clear-site-data" not in browser.get("/").headers


def test_the_learner_key_is_the_learners_not_the_browsers(make_client):
    first, second = make_client(), make_client()
    key = first.get("/api/exercises/same-device/submissions").json()["learner_key"]
    assert key == first.get("/api/exercises/same-device/submissions").json()["learner_key"]
    assert key != second.get("/api/exercises/same-device/submissions").json()["learner_key"]
    assert key not in first.get("/api/me").json()["learner_id"]
    after = first.post("/api/auth/logout")
    first.headers["X-CSRF-Token"] = after.json()["csrf_token"]
    state = first.get("/api/exercises/same-device/submissions").json()
    assert state["learner_key"] != key and state["signed_in"] is False


def test_check_rows_name_their_check_say_their_line_once_and_the_status_nests_no_brackets(learner):
    """Issue 29's wording: each row starts with its check's id (messages refer to `batch_on_device` above), a
    row never reached says which check it is, "line 20:" is the link itself, not text and a link."""
    code = (ROOT / "exercises" / "training-loop" / "wrong" / "batch_not_moved.py").read_text(encoding="utf-8")
    panel = form_run(learner, "training-loop", code)
    checks = panel[panel.index('class="exercise-checks"'):panel.index("</ul>", panel.index('class="exercise-checks"'))]
    same = checks[checks.index('data-check="same_device"'):].split("</li>")[0]
    assert '<code class="check-id">same_device</code>' in same
    assert 'data-line="20">line 20</a>: the same cause as <code>batch_on_device</code> above.' in same
    assert same.count("line 20") == 1
    trains = checks[checks.index('data-check="trains"'):].split("</li>")[0]
    assert '<code class="check-id">trains</code>' in trains
    assert "(not reached: the program stopped at line 20)" in trains
    assert "The optimizer steps after backward() and the loss goes down." in trains  # which check it is
    status = panel[panel.index('class="exercise-status"'):].split("</p>")[0]
    assert "ms on cuda:0, simulated on CPU)" in status and "(simulated on CPU))" not in status
    table = panel[panel.index('class="placement-table"'):panel.index("</table>", panel.index("placement-table"))]
    assert "`" not in table
    # the output of a simulated run says so where it is read, not only in the status line (issue 29)
    assert '<p class="exercise-simulated">Simulated: the GPUs in this run were the server' in panel


def test_the_status_keeps_one_level_of_brackets_for_the_ranks_of_a_job_and_a_real_card():
    # the devices a DDP verdict names (tests/grading/test_ddp_training.py) and a real GPU's (harness session)
    assert status_where(812, "cuda:0, cuda:1 (2 ranks, simulated on CPU)") == \
        "812 ms on cuda:0, cuda:1, 2 ranks, simulated on CPU"
    assert status_where(61, "cuda:0 (NVIDIA H100 80GB HBM3)") == "61 ms on cuda:0, NVIDIA H100 80GB HBM3"
    assert status_where(61, "") == "61 ms"  # a run stopped by a limit names no device
