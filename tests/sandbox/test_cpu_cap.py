"""The CPU a job's cgroup may use: one core per copy of the learner's program, under the cap of all jobs together.

Real cgroups of this host (root only); tests/security/test_job_cpu.py reads the same from a running job's group."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.content.exercises import load_exercises
from app.core.config import ROOT
from app.grading.grader import build_job
from app.runner import Job
from app.sandbox.cgroups import CFS_PERIOD_US, CgroupManager
from app.sandbox.job_limits import Limits
from app.sandbox.jobqueue import copies_of

CORES = len(os.sched_getaffinity(0))


def _quota(job) -> int:
    if job.version == "v2":
        return int(Path(f"{job.dirs['unified']}/cpu.max").read_text().split()[0])
    return int(Path(f"{job.dirs['cpu']}/cpu.cfs_quota_us").read_text())


def _parent_quota(manager) -> int:
    if manager.version == "v2":
        return int(Path(f"{manager.bases['unified']}/cpu.max").read_text().split()[0])
    return int(Path(f"{manager.bases['cpu']}/cpu.cfs_quota_us").read_text())


@pytest.fixture
def manager(request):
    made = []

    def make(reserve: float, idle: bool = False) -> CgroupManager:
        m = CgroupManager(cpu_reserve=reserve, jobs_idle=idle)
        if "cpu" not in m.controllers:
            pytest.skip(f"no cpu cgroup here: {m.reason or 'not root'}")
        made.append(m)
        return m

    if os.getuid() != 0:
        pytest.skip("the sandbox's cgroups need root")
    yield make
    for m in made:
        m.remove()


def test_a_job_gets_one_core_per_copy_of_its_program(manager):
    m = manager(0)
    assert m.jobs_cores() is None  # no reserve: no cap on all jobs together
    job = m.new_job(Limits())
    try:
        assert _quota(job) == CFS_PERIOD_US
        job.set_cores(2)
        assert _quota(job) == min(2, CORES) * CFS_PERIOD_US
        job.set_cores(CORES + 3)  # never more than the host has
        assert _quota(job) == CORES * CFS_PERIOD_US
    finally:
        job.remove()


def test_all_jobs_together_leave_the_reserve(manager):
    m = manager(0.5)
    assert _parent_quota(m) == int((CORES - 0.5) * CFS_PERIOD_US) and m.jobs_cores() == CORES - 0.5
    job = m.new_job(Limits())
    try:
        assert _quota(job) == min(CFS_PERIOD_US, _parent_quota(m))
        job.set_cores(2)  # v1 refuses a child's quota above its parent's: the job gets the cap
        assert _quota(job) == min(2 * CFS_PERIOD_US, _parent_quota(m))
    finally:
        job.remove()


def _parent_idle(manager) -> int:
    return int(Path(manager.bases.get("unified") or manager.bases["cpu"], "cpu.idle").read_text())


def test_the_parent_of_the_jobs_is_an_idle_group_when_asked(manager):
    idle, normal = manager(0.5, idle=True), manager(0.5)
    assert (idle.jobs_idle, _parent_idle(idle)) == (True, 1)
    assert (normal.jobs_idle, _parent_idle(normal)) == (False, 0)


def test_copies_come_from_the_checks_that_name_other_machines():
    exercises = load_exercises(ROOT / "exercises")
    graded = build_job(exercises["training-loop"], "pass")[0].payload()  # also_runs_on: [cpu]
    assert copies_of(graded) == 2 and copies_of(graded, real_gpu=True) == 1
    mac = exercises["runs-on-a-mac"]
    others = {m for c in mac.spec.checks for m in c.also_runs_on}
    assert copies_of(build_job(mac, "pass")[0].payload()) == 1 + len(others) > 2
    assert copies_of(build_job(exercises["pick-device"], "pass")[0].payload()) == 1
    assert copies_of(Job(code="pass").payload()) == 1
    assert copies_of({**graded, "mode": "run"}) == 1  # only the harness's grade mode forks the copies
