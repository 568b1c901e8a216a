"""The machine picker through the front door: the real app, real SQLite, the real sandbox, the course's exercises.

"Run on" is remembered per learner (anonymous ones too), posted through CSRF-protected routes (JSON and a plain
form), validated against what the exercise offers; a run and its verdict say the machine, the placement map names
its devices, and the submission stores it (app/content/machine_choices.py, app/web/routes/machines.py)."""

from __future__ import annotations

import re

import pytest

from app import ROOT
from app.content import machine_choices
from app.models import Learner, Submission
from tests.helpers import parse_sse


def solution(slug: str) -> str:
    return (ROOT / "exercises" / slug / "solution.py").read_text(encoding="utf-8")


def run(browser, slug: str, code: str, **extra) -> tuple[dict, dict]:
    response = browser.post(f"/api/exercises/{slug}/submissions", json={"code": code, **extra})
    assert response.status_code == 202, response.text
    events = parse_sse(browser.get(response.json()["events"]).text)
    return response.json(), events[-1][1]


def stored(app, model, key):
    with app.state.db.session() as session:
        return session.get(model, key)


def test_an_anonymous_learners_pick_is_remembered_and_runs_there(live_app, learner):
    picked = learner.post("/api/machine", json={"machine": "t4", "exercise": "same-device"})
    assert picked.status_code == 200, picked.text
    assert picked.json()["machine"] == {"id": "t4", "label": "Colab's T4", "machine": "t4", "gpus": 1}
    started, verdict = run(learner, "same-device", solution("same-device"))
    assert started["machine"]["id"] == "t4"
    assert verdict["status"] == "passed", verdict
    assert verdict["machine"] == "Colab's T4" and verdict["machine_id"] == "t4"
    assert {"device": "cuda:0", "name": "Tesla T4"} in verdict["devices"]
    assert stored(live_app, Submission, verdict["id"]).machine == "t4"
    learner_id = stored(live_app, Submission, verdict["id"]).learner_id
    assert stored(live_app, Learner, learner_id).machine == "t4"
    # the page remembers it: the exercise panel's picker has T4 selected
    page = learner.get("/lessons/cpu-gpu-border").text
    assert re.search(r'<option value="t4" selected>Colab&#39;s T4</option>', page)


def test_without_a_pick_an_exercise_runs_on_one_h100(learner):
    started, verdict = run(learner, "same-device", solution("same-device"))
    assert started["machine"]["id"] == "h100" and verdict["machine"] == "One H100"
    assert verdict["devices"][0]["device"] == "cuda:0" and "H100" in verdict["devices"][0]["name"]


def test_a_two_gpu_exercise_offers_only_two_h100s(learner):
    assert [c.id for c in machine_choices.for_exercise(
        learner.app.state.course.exercises["ddp-training"].spec)] == ["h100x2"]
    refused = learner.post("/api/machine", json={"machine": "h100", "exercise": "ddp-training"})
    assert refused.status_code == 422
    assert "cannot run on One H100" in refused.json()["detail"] and "h100x2 (Two H100s)" in refused.json()["detail"]
    refused = learner.post("/api/exercises/ddp-training/submissions", json={"code": "print(1)", "machine": "laptop"})
    assert refused.status_code == 422 and "h100x2" in refused.json()["detail"]


def test_unknown_machines_are_a_clear_422(learner):
    for body in ({"machine": "tpu"}, {"machine": 3}, {}, {"machine": "t4", "exercise": 7}):
        response = learner.post("/api/machine", json=body)
        assert response.status_code == 422, body
        assert "laptop (A laptop without a GPU)" in response.json()["detail"] or "slug" in response.json()["detail"]
    assert learner.post("/api/machine", json={"machine": "t4", "exercise": "nope"}).status_code == 404
    assert learner.post("/api/machine", content=b"{nope", headers={"content-type": "application/json"}
                        ).status_code == 400


def test_the_pick_needs_the_csrf_token(live_app):
    bare = live_app.browsers.new(csrf=False)
    assert bare.post("/api/machine", json={"machine": "t4"}).status_code == 403
    assert bare.post("/machine", data={"machine": "t4"}).status_code == 403


def test_the_form_without_javascript_remembers_and_goes_back(live_app, learner):
    token = learner.headers["X-CSRF-Token"]
    back = "/lessons/picking-a-device#exercise-pick-device"
    response = learner.post("/machine", data={"csrf_token": token, "machine": "mac", "exercise": "pick-device",
                                              "next": back}, follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == back
    page = learner.get("/lessons/picking-a-device").text
    assert '<option value="mac" selected>A MacBook (Apple silicon)</option>' in page
    refused = learner.post("/machine", data={"csrf_token": token, "machine": "mac", "exercise": "same-device",
                                             "next": "//evil.example/"}, follow_redirects=False)
    assert refused.status_code == 422 and "cannot run on A MacBook" in refused.text
    assert 'href="/"' in refused.text  # a foreign `next` is never followed


def test_pick_device_runs_on_the_laptop_and_the_mac(learner):
    for machine, device in (("laptop", "cpu"), ("mac", "mps:0")):
        _started, verdict = run(learner, "pick-device", solution("pick-device"), machine=machine)
        assert verdict["status"] == "passed", verdict
        assert verdict["machine_id"] == machine
        assert device in [d["device"] for d in verdict["devices"]]
        assert not any(d["device"].startswith("cuda") for d in verdict["devices"])


@pytest.mark.parametrize("slug", ["same-device", "training-loop", "bring-it-back", "model-internals"])
def test_exercises_written_for_cuda_do_not_offer_the_laptop(learner, slug):
    offered = [c.id for c in machine_choices.for_exercise(learner.app.state.course.exercises[slug].spec)]
    assert offered == ["t4", "h100", "h100x2"]


def test_an_exercise_about_its_own_machine_offers_only_that(learner):
    offered = machine_choices.for_exercise(learner.app.state.course.exercises["fits-on-one-gpu"].spec)
    assert [c.id for c in offered] == ["l4"]
