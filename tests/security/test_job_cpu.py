"""A job's CPU: one core per copy of the learner's program it runs at once, under the cap of all jobs together.

Read from outside, from the job's own cgroup while it runs (the job names its process; the test finds it in the
host's /proc): a graded job whose check also runs the program on the laptop (`also_runs_on`, two copies at once)
gets two cores, a plain job one, and neither more than the parent group of all jobs, which keeps
COURSE_SANDBOX_CPU_RESERVE for the web server and is an idle group where COURSE_SANDBOX_JOBS_IDLE asks for one (the
default), one that a busy host does not starve.
Runs against both pools (conftest.py)."""

from __future__ import annotations

import os
import secrets
import subprocess
import time
from pathlib import Path

import pytest

from app.content.exercises import load_exercises
from app.core.config import ROOT
from app.grading.grader import build_job
from app.runner import Job
from app.sandbox.cgroups import NORMAL_HOLD_S


def _cpu_group(version: str, pid: int) -> Path:
    """The directory of the cpu cgroup of host process `pid`."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, ctrls, path = line.split(":", 2)
        if version == "v2" and ctrls == "":
            return Path(f"/sys/fs/cgroup{path}")
        if version == "v1" and "cpu" in ctrls.split(","):
            return Path(f"/sys/fs/cgroup/{ctrls}{path}")
    raise AssertionError(f"process {pid} is in no cpu cgroup")


def _cores(version: str, pid: int) -> float:
    """The cores the cgroup of host process `pid` may use (its cpu.max over the period)."""
    group = _cpu_group(version, pid)
    if version == "v2":
        quota, period = (group / "cpu.max").read_text().split()
        return int(quota) / int(period)
    return int((group / "cpu.cfs_quota_us").read_text()) / int((group / "cpu.cfs_period_us").read_text())


def _parent_idle(version: str, pid: int) -> int:
    """cpu.idle of the parent of the cpu cgroup of host process `pid`: the group of all the server's jobs."""
    return int((_cpu_group(version, pid).parent / "cpu.idle").read_text())


def _while_running(sandbox, job: Job, name: str, read) -> list:
    """Run the job (it names its process `name`, prints, then sleeps) and read(version, pid) of each of its
    processes of that name when it prints."""
    version = sandbox.runner.info["cgroup_version"]
    seen: list = []

    def on_output(event) -> None:
        if event.line.strip() == "named" and not seen:
            pids = [int(p) for p in os.listdir("/proc") if p.isdigit() and _comm(p) == name]
            seen.extend(read(version, pid) for pid in pids)

    result = sandbox.run(job, on_output)
    assert result.stdout.startswith("named"), result
    assert seen, "no process of the job was found by its name"
    return seen


def _cores_while_running(sandbox, job: Job, name: str) -> list[float]:
    return _while_running(sandbox, job, name, _cores)


def _comm(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _program(name: str) -> str:
    # prctl(PR_SET_NAME): /proc/self/comm is not writable in the sandbox
    return (f"import ctypes, time\nctypes.CDLL(None).prctl(15, {name.encode()!r}, 0, 0, 0)\n"
            "print('named', flush=True)\ntime.sleep(1.0)\n")


def test_a_graded_job_with_a_copy_gets_a_core_per_copy_and_a_plain_job_one(sandbox):
    info = sandbox.runner.info
    assert info["cgroup_version"] in ("v1", "v2"), info.get("cgroup_note")
    cap = info["jobs_cpu_cores"] or float("inf")  # the parent group's cpu.max: all jobs together
    exercise = load_exercises(ROOT / "exercises")["training-loop"]
    assert [m for c in exercise.spec.checks for m in c.also_runs_on] == ["cpu"]  # one copy beside the graded run

    name = "cpu-" + secrets.token_hex(4)
    graded, _ = build_job(exercise, _program(name))
    assert set(_cores_while_running(sandbox, graded, name)) == {min(2.0, cap)}

    name = "cpu-" + secrets.token_hex(4)
    plain = Job(code=_program(name))
    assert set(_cores_while_running(sandbox, plain, name)) == {min(1.0, cap)}


def test_all_jobs_together_leave_the_reserve_to_the_web_server(sandbox):
    info = sandbox.runner.info
    reserve = sandbox.runner.settings.sandbox_cpu_reserve
    cores = len(os.sched_getaffinity(0))
    assert reserve > 0 and info["jobs_cpu_cores"] == round(cores - reserve, 3)


def test_the_jobs_group_is_an_idle_group_only_when_asked(sandbox):
    """The parent group of every job has cpu.idle as COURSE_SANDBOX_JOBS_IDLE says (on by default), read from a
    running job's own group. The starvation guard may have made it a normal group for NORMAL_HOLD_S while this
    suite's other worker kept the cores busy, so the read waits that out."""
    info = sandbox.runner.info
    wanted = sandbox.runner.settings.sandbox_jobs_idle
    assert info["jobs_cpu_idle"] is wanted, info.get("cgroup_note")

    def settled(version: str, pid: int) -> int:
        deadline = time.monotonic() + NORMAL_HOLD_S + 0.5
        while (idle := _parent_idle(version, pid)) != int(wanted) and time.monotonic() < deadline:
            time.sleep(0.05)
        return idle

    name = "idle-" + secrets.token_hex(4)
    program = _program(name).replace("time.sleep(1.0)", "time.sleep(2.0)")
    assert set(_while_running(sandbox, Job(code=program), name, settled)) == {int(wanted)}


def test_an_idle_jobs_group_does_not_starve_jobs_while_the_host_is_busy(sandbox):
    """With a busy loop on every core of the host, an idle group alone gives a job about 3/1024 of a core (its
    weight against each loop's), and a job that needs 0.3 s of CPU runs into its 10 s wall-clock limit. The
    starvation guard (CgroupManager.feed_jobs) makes the group a normal one while the job waits for a core, so the
    job ends as it would beside the loops without the idle group."""
    if not sandbox.runner.info["jobs_cpu_idle"]:
        pytest.skip("the jobs' group is not an idle group here (COURSE_SANDBOX_JOBS_IDLE off, or no cpu.idle)")
    code = ("import time\nstart = time.process_time()\nwhile time.process_time() - start < 0.3:\n    pass\n"
            "print('spun', flush=True)\n")
    loops = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in os.sched_getaffinity(0)]
    try:
        result = sandbox.run(Job(code=code))
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    assert (result.status, result.stdout.strip()) == ("ok", "spun"), result
