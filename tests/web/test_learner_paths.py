"""No server path where a learner can read it: a traceback through torch and the standard library, and a
program that prints torch's own location, leave neither the checkout's absolute path nor `site-packages` in any
API answer or page a learner can read (issue 19)."""

from __future__ import annotations

from app import ROOT
from tests.helpers import TEST_PASSWORD, create_account

# errors inside torch (a module's forward) and inside the standard library, and torch's own path printed
CODE = """import json
import sys
import torch
from torch import nn

print(torch.__file__, sys.prefix, nn.__file__)
print(json.__file__, file=sys.stderr)
model = nn.Sequential(nn.Linear(5, 2), nn.ReLU())
model(torch.randn(3, 4))
"""


def assert_no_server_path(text: str, where: str) -> None:
    assert str(ROOT) not in text, f"{where} shows the checkout's path"
    assert "site-packages" not in text, f"{where} shows a site-packages path"


def test_no_learner_readable_answer_holds_a_server_path(live_app):
    create_account(live_app, "paths@example.org", name="Pat")
    learner = live_app.browsers.new()
    login = learner.post("/api/auth/login", json={"email": "paths@example.org", "password": TEST_PASSWORD})
    learner.headers["X-CSRF-Token"] = login.json()["csrf_token"]
    submitted = learner.post("/api/exercises/same-device/submissions", json={"code": CODE}).json()
    stream = learner.get(submitted["events"]).text
    verdict = learner.get(submitted["url"]).json()
    assert 'File "torch/nn/modules/module.py"' in verdict["stderr"]  # the frames are there, as module paths
    assert "torch/__init__.py" in verdict["stdout"]
    answers = {"the event stream": stream, "the submission": learner.get(submitted["url"]).text,
               "the attempts": learner.get("/api/exercises/same-device/submissions").text,
               "the progress": learner.get("/api/progress").text, "me": learner.get("/api/me").text,
               "the export": learner.get("/api/account/export").text,
               "the lesson page": learner.get("/lessons/cpu-gpu-border", headers={"accept": "text/html"}).text}
    live_app.state.live.runs.pop(submitted["id"], None)  # and the stream rebuilt from the stored row
    answers["the stored event stream"] = learner.get(submitted["events"]).text
    for where, text in answers.items():
        assert_no_server_path(text, where)
