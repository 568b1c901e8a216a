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
    # s; the helper below outlives it. The budget is real time in which the copy must be forked from this (large)
    # test process and reply: 0.2-0.3 s at load average 11 on 2 cores, so 1 s left too little room on a loaded host
    monkeypatch.setattr(elsewhere, "ELSEWHERE_BUDGET_S", 3.0)

    def run(host):
        if os.fork() == 0:  # a helper process the program started and never joined, the reply's pipe open in it
            time.sleep(6)  # past the budget: collect() must not wait for the end of file
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


def test_a_graded_run_with_a_spare_and_two_machines_forks_no_copy_itself_and_gets_both_replies(monkeypatch):
    ran = []

    def prepare():
        ran.append("prepared")  # in the spare only: the test process never sees it

    def serve(command, host):  # in the spare, and in the copy it forks for the second machine
        batch = os.sched_getscheduler(0) == os.SCHED_BATCH  # SPARE_POLICY, kept across the spare's fork
        return {"finished": False, "exception": {"type": "RuntimeError", "line": 2,
                                                 "message": f"{command['code']} in pid {os.getpid()} batch {batch}"
                                                            + "x" * 100_000}}  # several records

    elsewhere.fork_spare(prepare, serve)
    spare = elsewhere._SPARE.pid

    def no_fork():
        raise AssertionError("the graded run forked a copy")

    monkeypatch.setattr(os, "fork", no_fork)
    copies = elsewhere.Elsewhere()
    mac = {"id": "mac", "title": "A Mac", "host": None}
    copies.start([LAPTOP, mac], lambda host: {"finished": True, "exception": None},
                 {"code": "from the spare", "filename": "main.py", "host": None})
    assert elsewhere._SPARE is None and ran == []
    laptop, other = copies.collect()
    assert (laptop["machine"], other["machine"]) == ("cpu", "mac") and laptop["completed"] and other["completed"]
    assert laptop["exception"]["message"] == f"from the spare in pid {spare} batch True" + "x" * 100_000
    head, _, tail = other["exception"]["message"].partition(" batch ")
    assert head.startswith("from the spare in pid ") and head != f"from the spare in pid {spare}"
    assert tail == "True" + "x" * 100_000


def test_a_copy_the_spare_forked_replies_although_the_spares_own_copy_never_ends(monkeypatch):
    monkeypatch.setattr(elsewhere, "ELSEWHERE_BUDGET_S", 3.0)

    def serve(command, host):
        if host.gpus == 2:  # the first copy, in the spare: still running when the budget is spent
            time.sleep(60)
        return {"finished": True, "exception": None}

    elsewhere.fork_spare(lambda: None, serve)
    spare = elsewhere._SPARE.pid
    copies = elsewhere.Elsewhere()
    slow = {"id": "slow", "title": "A slow machine", "host": {"gpus": 2}}
    gpu = {"id": "gpu", "title": "A GPU", "host": None}
    copies.start([slow, gpu], lambda host: {"finished": False, "exception": None},
                 {"code": "x = 1", "filename": "main.py", "host": None})
    first, second = copies.collect()
    assert not first["completed"] and first["finished"] is None
    assert second == {"machine": "gpu", "title": "A GPU", "finished": True, "exception": None, "completed": True}
    _, status = os.waitpid(spare, 0)  # stopped by collect, with the copy it forked
    assert os.WIFSIGNALED(status)


def test_a_spare_that_is_gone_leaves_its_copy_to_a_fork():
    def prepare():
        raise RuntimeError("could not build the session")

    elsewhere.fork_spare(prepare, lambda command, host: {"finished": False, "exception": None})
    os.waitpid(elsewhere._SPARE.pid, 0)  # it ended before its job came
    copies = elsewhere.Elsewhere()
    copies.start([LAPTOP], lambda host: {"finished": True, "exception": None},
                 {"code": "x = 1", "filename": "main.py", "host": None})
    assert copies.collect() == [{"machine": "cpu", "title": "A CPU-only laptop", "finished": True, "exception": None,
                                 "completed": True}]


def test_a_job_without_copies_stops_the_spare_and_a_job_without_a_spare_forks_its_copies():
    elsewhere.fork_spare(lambda: None, lambda command, host: {"finished": True, "exception": None})
    pid = elsewhere._SPARE.pid
    elsewhere.drop_spare()
    assert elsewhere._SPARE is None
    try:
        _, status = os.waitpid(pid, 0)
        # killed waiting, or it read the end of its closed command pipe first and exited 0 with no program (seen
        # under load: drop_spare closes the pipe before its kill): either way it ran nothing
        assert os.WIFSIGNALED(status) or os.waitstatus_to_exitcode(status) == 0, status
    except ChildProcessError:  # drop_spare reaped it already
        pass
    copies = elsewhere.Elsewhere()
    copies.start([LAPTOP], lambda host: {"finished": True, "exception": None},
                 {"code": "x = 1", "filename": "main.py", "host": None})
    assert copies.collect()[0]["completed"]


def test_the_spare_runs_its_copy_as_a_batch_thread_and_the_graded_run_keeps_its_policy():
    # a batch thread's wake-up does not preempt the graded run when the program is handed over (SPARE_POLICY)
    def serve(command, host):
        batch = os.sched_getscheduler(0) == os.SCHED_BATCH
        return {"finished": batch, "exception": None if batch else {"type": "Policy", "line": 1, "message": "normal"}}

    elsewhere.fork_spare(lambda: None, serve)
    copies = elsewhere.Elsewhere()
    copies.start([LAPTOP], lambda host: {"finished": False, "exception": None},
                 {"code": "x = 1", "filename": "main.py", "host": None})
    assert copies.collect()[0] == {"machine": "cpu", "title": "A CPU-only laptop", "finished": True,
                                   "exception": None, "completed": True}
    assert os.sched_getscheduler(0) == os.SCHED_OTHER
