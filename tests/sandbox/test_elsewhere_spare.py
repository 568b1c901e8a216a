"""A graded job's copies on other machines, run by the spare its waiting child forked before the job came
(app/harness/elsewhere.py fork_spare; the pool gives one to one of its children, app/sandbox/pools.py), through the
front door: it ends as a copy forked by the graded run does, and reaches the fork server no more than one.
"""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from app.content.exercises import load_exercises
from app.core.config import ROOT
from app.grading.grader import build_job, evaluate
from app.runner import BlockingRunner
from tests.helpers import make_settings
from tests.security.hostile import program

# the copy on the laptop says whether its process is older than its job: the spare was forked with its waiting
# child, seconds before; a copy forked by the graded run starts with it
AGED = """\
import os
import torch

device = "cuda" if torch.cuda.is_available() else "cpu"
if device == "cpu":
    fields = open("/proc/self/stat").read().rsplit(")", 1)[1].split()
    age = float(open("/proc/uptime").read().split()[0]) - int(fields[19]) / os.sysconf("SC_CLK_TCK")
    raise RuntimeError("an old process" if age > 0.5 else "a new process")
x = torch.ones(3, device=device)
print(x.sum().item())
"""
# each copy names its parent; the graded run (on the simulated GPU) prints its own pid
PARENTS = """\
import os
import torch

if not torch.cuda.is_available():
    raise RuntimeError(str(os.getppid()))
print("graded", os.getpid())
"""
# each copy names its random seed; the graded run prints its own
SEEDS = """\
import torch

if not torch.cuda.is_available():
    raise RuntimeError(str(torch.initial_seed()))
print("graded", torch.initial_seed())
"""
SETTLE_S = 2.5  # s; long enough for the pool's children (and the spare) to be waiting before a job comes


@pytest.fixture(scope="module")
def spared(tmp_path_factory):
    """A real sandbox with two children built ahead, one of them with a spare."""
    with BlockingRunner(make_settings(tmp_path_factory.mktemp("spare"), sandbox_prefork=2)) as runner:
        yield runner


@pytest.fixture(scope="module")
def exercises():
    return load_exercises(ROOT / "exercises")


def _laptop(runner, job):
    time.sleep(SETTLE_S)
    result = runner.run(job)
    assert result.status == "ok" and result.report, result
    [laptop] = result.report["elsewhere"]
    return laptop


def test_the_spare_runs_the_copy_and_it_ends_as_a_forked_copy_does(spared, exercises):
    training = exercises["training-loop"]
    job, _ = build_job(training, AGED)
    own_limits = replace(spared.runner.limits, wall_s=spared.runner.limits.wall_s + 1)  # a child forked for it
    spare, forked = _laptop(spared, job), _laptop(spared, replace(job, limits=own_limits))
    assert spare["exception"]["message"] == "an old process"
    assert forked["exception"]["message"] == "a new process"
    for copy in (spare, forked):
        copy["exception"].pop("message")
    assert spare == forked == {"machine": "cpu", "title": spare["title"], "finished": False, "completed": True,
                               "exception": {"type": "RuntimeError", "line": 8}}


def test_the_spare_forks_the_second_copy_itself_and_the_graded_run_forks_none(spared, exercises):
    job, _ = build_job(exercises["runs-on-a-mac"], PARENTS)
    time.sleep(SETTLE_S)
    result = spared.run(job)
    assert result.status == "ok" and result.report, result
    graded = int(result.stdout.split()[-1])
    first, second = result.report["elsewhere"]
    assert first["completed"] and second["completed"], result.report["elsewhere"]
    assert int(first["exception"]["message"]) == graded  # the spare, forked by the graded job's process ahead
    assert int(second["exception"]["message"]) not in (graded, 0, 1)  # the spare, not the graded run


def test_every_copy_starts_from_the_graded_runs_random_seed(spared, exercises):
    """The job draws a new seed at its start (app/harness/interpreter.py): a copy forked from the graded run inherits
    it, the spare (forked before the job came) and the copy it forks are handed it."""
    training, mac = exercises["training-loop"], exercises["runs-on-a-mac"]
    own_limits = replace(spared.runner.limits, wall_s=spared.runner.limits.wall_s + 1)  # a child forked for it
    jobs = [build_job(training, SEEDS)[0], build_job(mac, SEEDS)[0]]
    jobs.append(replace(jobs[0], limits=own_limits))  # no spare: the graded run forks its copy
    seeds = set()
    for job in jobs:
        time.sleep(SETTLE_S)
        result = spared.run(job)
        assert result.status == "ok" and result.report, result
        graded = result.stdout.split()[-1]
        assert [copy["exception"]["message"] for copy in result.report["elsewhere"]] == [graded] * len(
            result.report["elsewhere"]), (graded, result.report["elsewhere"])
        seeds.add(graded)
    assert len(seeds) == len(jobs)  # and each job's its own


def test_the_solution_graded_with_its_copy_in_the_spare_passes(spared, exercises):
    for slug in ("training-loop", "runs-on-a-mac"):
        exercise = exercises[slug]
        job, key = build_job(exercise, exercise.solution)
        time.sleep(SETTLE_S)
        verdict = evaluate(exercise, spared.run(job), key, exercise.solution)
        assert verdict.status == "passed", verdict


@pytest.mark.parametrize("slug", ["same-device", "runs-on-a-mac"])
def test_the_copies_in_the_spare_cannot_reach_the_server(spared, exercises, slug):
    """As tests/security/test_job_isolation.py asks of a forked copy: the copy that asks for the key first must not
    be the one that gets it. runs-on-a-mac has two copies: the spare runs one, and forks the other itself."""
    exercise = exercises[slug]
    job, key = build_job(exercise, program("ask_for_the_key_elsewhere") + exercise.solution)
    time.sleep(SETTLE_S)
    result = spared.run(job)
    assert "GOT_KEY 32" in result.stdout, result  # the graded run asked after the copies, and still got the key
    assert result.report is None and "asked for the grader's key itself" in result.stderr, result
    assert evaluate(exercise, result, key).status == "failed"
