"""One learner's job sees nothing of another's and cannot take the sandbox down (issue 23), under both pools.

Jobs are forked by the zygote, which never held any job's data, so a job that walks its frames, unfreezes and
walks every object, or scans its own memory finds nothing of a job that runs beside it or ran before it. What a
job writes on its pipes is bounded and validated, so the crash programs end their own job and nothing else (the
conftest's still_serves checks the same fork server, never restarted, runs the next job). The key a graded job's
report must echo reaches the job only after its learner code has run.
"""

from __future__ import annotations

import re
import secrets
import threading
import time

import pytest

from app.content.exercises import load_exercises
from app.core.config import ROOT
from app.grading import build_job, evaluate, grade_submission
from app.runner import Job
from tests.security.hostile import program, run

VICTIM = """import time
token = "__H1R__"[::-1] + "__H2R__"[::-1]
print("VICTIM", token, flush=True)
time.sleep(__SLEEP__)
print("VICTIM done", flush=True)
"""


@pytest.fixture(scope="module")
def exercises():
    return load_exercises(ROOT / "exercises")


def _token() -> tuple[str, str]:
    return "tok" + secrets.token_hex(10), secrets.token_hex(10) + "end"


def _victim(h1: str, h2: str, sleep_s: float) -> str:
    return VICTIM.replace("__H1R__", h1[::-1]).replace("__H2R__", h2[::-1]).replace("__SLEEP__", str(sleep_s))


def _steal_figures(stdout: str) -> dict[str, int]:
    match = re.search(r"STEAL (.*)", stdout)
    assert match, stdout
    words = match.group(1).split()
    return {k: int(v) for k, v in zip(words[::2], words[1::2])}


def _in_thread(fn) -> tuple[threading.Thread, list]:
    box: list = []
    thread = threading.Thread(target=lambda: box.append(fn()), daemon=True)
    thread.start()
    return thread, box


def test_a_job_finds_nothing_of_a_job_running_beside_it_or_before_it(sandbox):
    h1, h2 = _token()
    printed = threading.Event()
    events: list = []

    def victim():
        def on_line(event):
            events.append(event)
            if "VICTIM tok" in event.line:
                printed.set()
        return sandbox.run(Job(code=_victim(h1, h2, 3)), on_output=on_line)

    thread, box = _in_thread(victim)
    assert printed.wait(30), events
    # other limits than the defaults: a child forked for the thief now, while the victim runs
    during = run(sandbox, "steal_other_jobs", {"H1R": h1[::-1], "H2R": h2[::-1]}, wall_s=20, cpu_s=20)
    thread.join(60)
    assert box and box[0].status == "ok" and h1 + h2 in box[0].stdout, box
    after = run(sandbox, "steal_other_jobs", {"H1R": h1[::-1], "H2R": h2[::-1]}, wall_s=20, cpu_s=20)
    for result in (during, after):
        assert result.status == "ok", result
        figures = _steal_figures(result.stdout)
        assert figures["control_objects"] >= 1 and figures["control_memory"] >= 1, figures  # the searches see
        assert figures["server_objects"] == 0, figures
        assert figures["token_objects"] == 0 and figures["token_memory"] == 0, figures


CRASHES = ["crash_status_overflow", "crash_deep_report", "crash_huge_frame"]


def _grade(sandbox, exercise, code: str):
    return sandbox.call(grade_submission(exercise, code, sandbox.runner))


@pytest.mark.parametrize("name", CRASHES)
def test_a_crash_program_ends_its_own_job_while_a_victim_passes(sandbox, exercises, name):
    same_device = exercises["same-device"]
    victim_code = "import time\ntime.sleep(1.5)\n" + same_device.solution
    thread, box = _in_thread(lambda: _grade(sandbox, same_device, victim_code))
    time.sleep(0.3)
    verdict = _grade(sandbox, same_device, program(name))
    thread.join(60)
    assert verdict.status in ("error", "failed"), verdict
    assert box and box[0].status == "passed", box


def test_twenty_crash_submissions_leave_ten_victim_runs_passed(sandbox, exercises):
    same_device = exercises["same-device"]
    thread, box = _in_thread(lambda: [_grade(sandbox, same_device, same_device.solution).status
                                      for _ in range(10)])
    crashed = [_grade(sandbox, same_device, program(CRASHES[i % 3])).status for i in range(20)]
    thread.join(120)
    assert set(crashed) <= {"error", "failed"}, crashed
    assert box and box[0] == ["passed"] * 10, box


def test_a_status_pipe_number_past_an_exit_code_is_ignored(sandbox):
    result = run(sandbox, "crash_status_overflow")
    assert result.status == "ok" and "wrote the status pipe" in result.stdout, result


def test_a_graded_job_finds_no_key_and_its_forged_report_is_rejected(sandbox, exercises):
    job, key = build_job(exercises["same-device"], program("forge_report"))
    assert key not in str(job.payload())  # the key travels beside the payload, never in it
    result = sandbox.run(job)
    assert "CANDIDATES" in result.stdout, result
    assert key not in result.stdout
    assert evaluate(exercises["same-device"], result, key).status == "failed"


def test_a_rank_finds_no_key_and_the_forged_report_is_rejected(sandbox, exercises):
    ddp = exercises["ddp-training"]
    job, key = build_job(ddp, program("forge_report"))
    assert job.nproc == 2
    result = sandbox.run(job)
    assert result.stdout.count("CANDIDATES") == 2, result
    assert key not in result.stdout
    assert evaluate(ddp, result, key).status == "failed"


def test_a_job_that_asks_for_the_key_itself_has_its_report_discarded(sandbox, exercises):
    same_device = exercises["same-device"]
    job, key = build_job(same_device, program("ask_for_the_key") + same_device.solution)
    result = sandbox.run(job)
    assert "GOT_KEY 32" in result.stdout, result  # it did get the key, asking first ...
    assert result.report is None  # ... so the harness's own request got nothing, and the report was discarded
    assert "asked for the grader's key itself" in result.stderr
    assert evaluate(same_device, result, key).status == "failed"


def test_the_copy_that_runs_without_a_gpu_cannot_reach_the_server(sandbox, exercises):
    """The "also runs without a GPU" check runs a second copy of the program beside the graded one (harness/
    elsewhere.py); the copy that asks for the key first must not be the one that gets it."""
    same_device = exercises["same-device"]
    job, key = build_job(same_device, program("ask_for_the_key_elsewhere") + same_device.solution)
    result = sandbox.run(job)
    assert "GOT_KEY 32" in result.stdout, result  # the graded run asked after the copy, and still got the key
    assert result.report is None and "asked for the grader's key itself" in result.stderr, result
    assert evaluate(same_device, result, key).status == "failed"


def test_the_solution_still_passes_with_the_key_asked_last(sandbox, exercises):
    same_device = exercises["same-device"]
    assert _grade(sandbox, same_device, same_device.solution).status == "passed"


def test_breaking_sys_stdout_is_said_in_its_own_words(sandbox):
    result = sandbox.run_code("import sys\nprint('before')\nsys.stdout = None\nprint('after')\n")
    assert result.status == "ok", result
    assert result.stdout == "before\n"
    assert "sandbox setup failed" not in result.stderr
    assert "your program set sys.stdout to None" in result.stderr
