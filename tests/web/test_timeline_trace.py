"""GET /api/submissions/{id}/trace through the front door (issue 26, part 4): a run on the simulated H100 streams a
verdict whose `timeline` carries the rows and events the page draws, and its owner downloads the same run as a
Chrome trace; another learner gets 404, as for the submission itself; a run without a timeline says why not."""

from __future__ import annotations

import html

import pytest

from app import ROOT
from app.core.errors import Refusal
from app.models import Submission
from app.submissions.views import trace_json
from tests.helpers import parse_sse

SOLUTION = (ROOT / "exercises" / "same-device" / "solution.py").read_text(encoding="utf-8")


def test_the_owner_downloads_the_runs_chrome_trace_and_no_one_else(live_app, learner):
    response = learner.post("/api/exercises/same-device/submissions", json={"code": SOLUTION})
    assert response.status_code == 202, response.text
    submission_id = response.json()["id"]
    verdict = parse_sse(learner.get(f"/api/submissions/{submission_id}/events").text)[-1][1]
    timeline = verdict["timeline"]
    assert [r["name"] for r in timeline["rows"]][0] == "host" and timeline["events"]
    assert timeline["label"].startswith("Modeled for one H100") and "NVIDIA H200" in timeline["label"]
    assert timeline["summary"].startswith("Modeled run ")

    download = learner.get(f"/api/submissions/{submission_id}/trace")
    assert download.status_code == 200
    assert download.headers["content-disposition"] == \
        f'attachment; filename="same-device-{submission_id[:8]}-trace.json"'
    trace = download.json()
    threads = [e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"]
    assert threads == [r["name"] for r in timeline["rows"]]
    drawn = [e for e in trace["traceEvents"] if e["ph"] in ("X", "i")]
    assert len(drawn) == len(timeline["events"]) == trace["otherData"]["events_kept"]
    assert trace["otherData"]["machine"] == "h100" and trace["otherData"]["timeline"]["syncs"] == timeline["syncs"]

    other = live_app.browsers.new()
    assert other.get(f"/api/submissions/{submission_id}/trace").status_code == 404
    assert learner.get("/api/submissions/0123456789abcdef0123456789abcdef/trace").status_code == 404


@pytest.mark.parametrize("verdict", [None, {"status": "passed", "timeline": None}])
def test_a_run_without_a_modeled_timeline_has_no_trace(verdict):
    submission = Submission(id="ab" * 16, exercise_slug="same-device", code="", status="passed", verdict=verdict)
    with pytest.raises(Refusal) as refused:
        trace_json(submission)
    assert refused.value.status_code == 404 and "no modeled timeline" in str(refused.value)


def test_the_page_gives_each_ranks_figures_of_a_ddp_run(live_app, learner):
    code = (ROOT / "exercises" / "ddp-training" / "solution.py").read_text(encoding="utf-8")
    response = learner.post("/api/exercises/ddp-training/submissions", json={"code": code})
    assert response.status_code == 202, response.text
    verdict = parse_sse(learner.get(f"/api/submissions/{response.json()['id']}/events").text)[-1][1]
    summary = verdict["timeline"]["summary"]
    assert "over 2 ranks" in summary and "Rank 0" in summary and "Rank 1" in summary, summary
    # the line above the drawing, in the page the server renders (what a reader without JavaScript gets)
    page = learner.get("/lessons/multi-gpu-and-distributed", headers={"accept": "text/html"}).text
    shown = page.split('<p class="timeline-totals">', 1)[1].split("</p>", 1)[0]
    assert html.unescape(shown) == summary, shown
