"""The copies of a graded program on the other machines a check names (app/harness/elsewhere.py), forked for real.

Through the sandbox they are graded in tests/grading/test_verdict_pointers.py and tests/security/test_job_cpu.py;
here the reply between a copy and the graded run, which needs no sandbox around it.
"""

from __future__ import annotations

import os
import time

from app.harness import elsewhere

LAPTOP = {"id": "cpu", "title": "A CPU-only laptop", "host": None}


def test_a_copy_that_said_how_it_ended_counts_although_a_process_it_started_still_holds_the_pipe(monkeypatch):
    monkeypatch.setattr(elsewhere, "ELSEWHERE_BUDGET_S", 1.0)  # s; the helper below outlives it

    def run(host):
        if os.fork() == 0:  # a helper process the program started and never joined, the reply's pipe open in it
            time.sleep(3)
            os._exit(0)
        return {"finished": True, "exception": None}

    copies = elsewhere.Elsewhere()
    copies.start([LAPTOP], run)
    assert copies.collect() == [{"machine": "cpu", "title": "A CPU-only laptop", "finished": True, "exception": None,
                                 "completed": True}]


def test_a_copy_that_stopped_names_the_exception_and_the_learners_line():
    def run(host):
        return {"finished": False, "exception": {"type": "AssertionError", "line": 7, "traceback": "...",
                                                 "message": "Torch not compiled with CUDA enabled\nsecond line"}}

    copies = elsewhere.Elsewhere()
    copies.start([LAPTOP], run)
    [ended] = copies.collect()
    assert ended["completed"] and ended["finished"] is False
    assert ended["exception"] == {"type": "AssertionError", "line": 7,
                                  "message": "Torch not compiled with CUDA enabled\nsecond line"}
