"""A run's verdict event (app/submissions/live.py `shown`) is made without reading the verdict back through its
stored text where that trip changes nothing, and with it where it may: either way the event's bytes are those of the
row read back (`verdict_json(as_stored(...))`), which is what the learner reads once it is stored."""

from __future__ import annotations

import math

import pytest

from app.models import Submission, utcnow
from app.submissions.finish import as_stored
from app.submissions.live import JsonText, encoded, shown, verdict_json

VERDICT = {"exercise": "training-loop", "status": "passed", "duration_ms": 31, "device": "cuda:0",
           "checks": [{"id": "on_device", "passed": True, "message": "é ✓ /tmp/x.py", "line": 12}],
           "stdout": "epoch 0 loss 0.6931\n", "stderr": "", "machine": "One H100",
           "timeline": {"rows": [{"name": "GPU 0"}], "events": [[0, 1.25, 3.5e-05, "kernel", "addmm", 14]],
                        "total_us": 1234.5678901234}}


def row(code: str = "print('hi')\n") -> Submission:
    now = utcnow()
    return Submission(id="a" * 32, learner_id="b" * 32, exercise_slug="training-loop", code=code, status="running",
                      machine=None, created_at=now, attempt=1)


@pytest.mark.parametrize("change, code", [
    ({}, "print('hi')\n"),
    ({"stdout": "before\x00after\n"}, "print('hi')\n"),  # a NUL: stored as U+FFFD
    ({"stderr": "lone \ud800 surrogate"}, "print('hi')\n"),  # a lone surrogate: stored as U+FFFD
    ({"stdout": "a backslash: \\u0000 as text\n"}, "print('hi')\n"),  # reads like an escape, is not one
    ({}, "print('\\u0000')\n"),  # the code shows the same text
    ({"timeline": {"total_us": math.nan}}, "x = 1\n"),  # not plain JSON: FastAPI's way, as before
])
def test_the_event_is_the_row_read_back(change, code):
    verdict = {**VERDICT, **change}
    submission, at = row(code), utcnow()
    expected = encoded(verdict_json(as_stored(submission, verdict, at)))
    event = shown(submission, verdict, at)
    assert type(event) is type(expected) and event == expected
    if "stdout" in change and "\x00" in change["stdout"]:
        assert "\\u0000" not in event and "\\ufffd" in event


def test_a_plain_verdict_is_text_made_once():
    assert isinstance(shown(row(), VERDICT, utcnow()), JsonText)
