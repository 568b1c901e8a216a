"""Lesson code runs in the page, through the front door: the real app, real SQLite, the real sandbox, the course's
own lessons. A runnable block runs on the learner's "Run on" machine (default one H100), as written or edited, its
output streams as an exercise run's does and ends with `done` naming the machine, and nothing is stored
(app/web/routes/blocks.py, app/submissions/block_runs.py)."""

from __future__ import annotations

import re

from sqlalchemy import func, select

from app.models import ExerciseProgress, Submission
from tests.helpers import parse_sse

LESSON = "cpu-gpu-border"


def block_number(app, lesson: str, text: str) -> int:
    """The number (1 is the first) of the lesson's runnable block holding `text`."""
    blocks = app.state.course.get(lesson).runnable_blocks
    return next(i for i, block in enumerate(blocks, 1) if text in block.code)


def run(browser, number: int, lesson: str = LESSON, **body) -> tuple[dict, list[tuple[str, dict]]]:
    response = browser.post(f"/api/lessons/{lesson}/blocks/{number}/runs", json=body)
    assert response.status_code == 202, response.text
    return response.json(), parse_sse(browser.get(response.json()["events"]).text)


def printed(events) -> list[str]:
    return [item["line"] for kind, data in events if kind == "output" for item in data["lines"]
            if item["stream"] == "stdout"]


def stored_rows(app) -> tuple[int, int]:
    with app.state.db.session() as session:
        return (session.scalar(select(func.count()).select_from(Submission)),
                session.scalar(select(func.count()).select_from(ExerciseProgress)))


def test_a_block_runs_on_one_h100_by_default_streams_and_stores_nothing(live_app, learner):
    before = stored_rows(live_app)
    moved = block_number(live_app, LESSON, "batch = batch.to(device)")
    started, events = run(learner, moved)
    assert started["machine"]["id"] == "h100" and started["edited"] is False
    assert [kind for kind, _ in events][-1] == "done" and {kind for kind, _ in events[:-1]} == {"output"}
    assert printed(events) == ["cuda:0", "True"]  # the simulated H100's device, as the lesson says a GPU prints
    done = events[-1][1]
    assert done["status"] == "ok" and done["exit_code"] == 0 and done["machine"] == "One H100"
    assert done["machine_id"] == "h100" and "H100" in done["devices"][0]["name"]
    assert stored_rows(live_app) == before, "a lesson block's run stores no submission and no progress"


def test_the_picked_machine_runs_the_block_and_an_edit_runs_as_edited(learner, live_app):
    moved = block_number(live_app, LESSON, "batch = batch.to(device)")
    assert learner.post("/api/machine", json={"machine": "laptop"}).status_code == 200
    started, events = run(learner, moved)
    assert started["machine"]["label"] == "A laptop without a GPU"
    assert printed(events) == ["cpu", "True"] and events[-1][1]["machine"] == "A laptop without a GPU"
    code = "import torch\nprint(torch.backends.mps.is_available(), torch.ones(1, device='mps').device)\n"
    started, events = run(learner, moved, machine="mac", code=code)
    assert started["edited"] is True and started["machine"]["id"] == "mac"
    assert printed(events) == ["True mps:0"] and events[-1][1]["machine"] == "A MacBook (Apple silicon)"
    started, events = run(learner, moved, code="import sys\nprint('half')\nsys.exit(3)\n")
    assert printed(events) == ["half"] and events[-1][1]["status"] == "failed" and events[-1][1]["exit_code"] == 3


def test_bad_input_gets_a_clear_error(learner, live_app):
    url = f"/api/lessons/{LESSON}/blocks/1/runs"
    limit = live_app.state.settings.sandbox_source_bytes
    too_large = learner.post(url, json={"code": "x" * (limit + 1)})
    assert too_large.status_code == 413 and "limit" in too_large.json()["detail"]
    nul = learner.post(url, json={"code": "print(1)\x00"})
    assert nul.status_code == 400 and "NUL" in nul.json()["detail"]
    binary = learner.post(url, content=b'{"code": "\xff\xfe"}', headers={"content-type": "application/json"})
    assert binary.status_code == 400 and "UTF-8" in binary.json()["detail"]
    assert learner.post(url, content=b"{nope", headers={"content-type": "application/json"}).status_code == 400
    for body in ({"code": 5}, {"machine": "tpu"}, {"machine": 7}):
        response = learner.post(url, json=body)
        assert response.status_code == 422, body
        assert isinstance(response.json()["detail"], str)
    count = len(live_app.state.course.get(LESSON).runnable_blocks)
    for number in ("0", str(count + 1), "abc", "1.5", "١"):
        response = learner.post(f"/api/lessons/{LESSON}/blocks/{number}/runs", json={})
        assert response.status_code == 404, number
        assert f"numbered 1 to {count}" in response.json()["detail"]
    assert learner.post("/api/lessons/no-such-lesson/blocks/1/runs", json={}).status_code == 404


def test_a_run_needs_the_csrf_token_and_its_stream_is_its_learners_only(live_app, learner):
    bare = live_app.browsers.new(csrf=False)
    assert bare.post(f"/api/lessons/{LESSON}/blocks/1/runs", json={}).status_code == 403
    started = learner.post(f"/api/lessons/{LESSON}/blocks/1/runs").json()  # no body at all: the block as written
    other = live_app.browsers.new()
    refused = other.get(started["events"])
    assert refused.status_code == 404 and "of yours" in refused.json()["detail"]
    assert parse_sse(learner.get(started["events"]).text)[-1][0] == "done"
    assert other.get("/api/runs/nope/events").status_code == 404


def test_every_runnable_block_of_the_lesson_page_has_its_run_and_picker(learner, live_app):
    page = learner.get(f"/lessons/{LESSON}").text
    count = len(live_app.state.course.get(LESSON).runnable_blocks)
    assert count >= 5
    for number in range(1, count + 1):
        assert f'id="block-{number}"' in page and f'data-block="{number}"' in page
        assert f'<select id="block-{number}-machine" name="machine" class="run-on-select">' in page
    assert 'src="/static/js/lesson-block.js' in page or "js/lesson-block" in page


# --- without JavaScript: the block's "Run on" form posts to the block's run, which answers a page with the output


def form_of(page: str, number: int) -> dict[str, str]:
    """The block's "Run on" form as a browser without JavaScript sees it: where its Run posts, and its fields."""
    run = page.index(f'id="block-{number}-run"')
    form = page[page.index("<form", run):page.index("</form>", run)]
    action = re.search(r'class="button block-run-nojs" formaction="([^"]+)">Run</button>', form)
    assert action, form
    fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', form))
    selected = re.search(r'<option value="(\w+)" selected>', form)
    return {"action": action.group(1), "csrf_token": fields["csrf_token"], "machine": selected.group(1)}


def test_without_javascript_a_blocks_run_form_answers_a_page_with_its_output(live_app):
    browser = live_app.browsers.new(csrf=False)  # no script: no header, only the form's own token
    before = stored_rows(live_app)
    moved = block_number(live_app, LESSON, "batch = batch.to(device)")
    form = form_of(browser.get(f"/lessons/{LESSON}", headers={"accept": "text/html"}).text, moved)
    assert form["action"] == f"/lessons/{LESSON}/blocks/{moved}/run" and form["machine"] == "h100"
    page = browser.post(form["action"], data={"csrf_token": form["csrf_token"], "machine": "laptop"})
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    start = page.text.index(f'id="block-{moved}-output"')
    output = page.text[start:page.text.index("</div>", start)]
    assert re.findall(r'<span class="line stdout">([^\n<]*)', output) == ["cpu", "True"]
    assert "Finished in " in page.text and "on A laptop without a GPU." in page.text
    assert f'<a href="/lessons/{LESSON}#block-{moved}">Back to the lesson</a>' in page.text
    assert '<option value="laptop" selected>' in page.text  # the form to run it again keeps the machine
    assert stored_rows(live_app) == before, "a run without JavaScript stores nothing either"
    code = "import torch\r\nprint(torch.ones(1, device='cuda').device)\r\n"  # a textarea's lines end in CRLF
    edited = browser.post(form["action"], data={"csrf_token": form["csrf_token"], "machine": "h100", "code": code})
    assert edited.status_code == 200 and "as you edited it" in edited.text
    assert '<span class="line stdout">cuda:0\n</span>' in edited.text and "on One H100." in edited.text
    assert "print(torch.ones(1, device=&#39;cuda&#39;).device)\n</textarea>" in edited.text


def test_without_javascript_a_loopback_block_runs_and_refusals_are_pages(live_app):
    browser = live_app.browsers.new(csrf=False)
    lesson = "multi-gpu-and-distributed"
    gloo = block_number(live_app, lesson, '"gloo"')
    form = form_of(browser.get(f"/lessons/{lesson}", headers={"accept": "text/html"}).text, gloo)
    page = browser.post(form["action"], data={"csrf_token": form["csrf_token"]})  # the machine of the picker
    assert page.status_code == 200, page.text
    assert "backend: gloo | world size: 1" in page.text and "step 2: loss 1.111" in page.text
    assert browser.post(form["action"], data={"machine": "h100"}).status_code == 403  # no token, no run
    unknown = browser.post(form["action"], data={"csrf_token": form["csrf_token"], "machine": "tpu"})
    assert unknown.status_code == 422 and "Back to the lesson" in unknown.text and "laptop" in unknown.text
    missing = browser.post(f"/lessons/{lesson}/blocks/99/run", data={"csrf_token": form["csrf_token"]})
    assert missing.status_code == 404
