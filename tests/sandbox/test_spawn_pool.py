"""The spawn-then-isolate pool (the GPU slots' pool) in its CPU mode, with real processes: children warm up, then
isolate, run one job and exit. tests/security and tests/grading run their whole suites against this pool too;
here are the parts that only this pool has: a warmed-up child has threads before it isolates, and it is made
before its job's limits are known. Also: GPU slots asked for on this host, which has no GPU."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest

from app import ROOT
from app.runner import BlockingRunner, Job, LocalRunner
from app.sandbox.gpus import GpuConfigError
from app.sandbox.job_limits import Limits
from tests.helpers import make_settings


@pytest.fixture(scope="module")
def spawn_sandbox(tmp_path_factory):
    """A spawn pool whose children start a thread while warming up (a test-only server option), as CUDA does."""
    settings = make_settings(tmp_path_factory.mktemp("spawn"), sandbox_pool="spawn", sandbox_prefork=1)
    with BlockingRunner(settings, server_options={"warm_probe_thread": True}) as runner:
        yield runner


def run_json(runner, code: str, **kw) -> dict:
    result = runner.run(Job(code=code, filename="probe.py", **kw))
    assert result.status == "ok", result
    return json.loads(result.stdout.strip().splitlines()[-1])


THREADS = r"""
import json, os, sys
answer = sys.modules["app.sandbox.warm"].PROBE.ask()
tasks = {}
for tid in os.listdir("/proc/self/task"):
    status = dict(l.split(":", 1) for l in open(f"/proc/self/task/{tid}/status").read().splitlines() if ":" in l)
    tasks[tid] = {k: status[k].split()[0] for k in ("Uid", "Seccomp", "NoNewPrivs", "CapEff")}
print(json.dumps({"probe": answer, "tasks": tasks}))
"""


def test_a_thread_started_during_warm_up_is_refused_what_seccomp_refuses(spawn_sandbox):
    probe = run_json(spawn_sandbox, THREADS)["probe"]
    assert probe["tid"] != 1  # not the job's main thread: one that existed before the filter was loaded
    assert (probe["inet_socket"], probe["unshare"]) == ("EPERM", "EPERM")


def test_every_thread_of_the_job_is_filtered_unprivileged_and_without_new_privileges(spawn_sandbox):
    tasks = run_json(spawn_sandbox, THREADS)["tasks"]
    assert len(tasks) >= 2
    for status in tasks.values():
        assert status["Seccomp"] == "2" and status["NoNewPrivs"] == "1"
        assert status["Uid"] != "0" and int(status["CapEff"], 16) == 0


def test_each_job_gets_a_child_of_its_own(spawn_sandbox):
    leave = "import sys, pathlib; pathlib.Path('/tmp/left').write_text('x'); sys.modules['os'].LEFT = 1; print(1)"
    look = ("import json, os, pathlib; print(json.dumps([pathlib.Path('/tmp/left').exists(), "
            "hasattr(os, 'LEFT')]))")
    assert run_json(spawn_sandbox, leave) == 1
    assert run_json(spawn_sandbox, look) == [False, False]


def test_a_jobs_own_tighter_limits_apply_to_the_child_made_before_it(spawn_sandbox):
    base = spawn_sandbox.runner.limits
    tight = Limits(**{**base.to_dict(), "cpu_s": 3, "memory_bytes": 256 << 20})
    limits = run_json(spawn_sandbox, "import json, resource; print(json.dumps([resource.getrlimit("
                                     "resource.RLIMIT_CPU)[0], resource.getrlimit(resource.RLIMIT_AS)[0]]))",
                      limits=tight)
    default = run_json(spawn_sandbox, "import json, resource; print(json.dumps(resource.getrlimit("
                                      "resource.RLIMIT_AS)[0]))")
    cpu_soft, address_space = limits
    assert cpu_soft <= 3 + 2  # the job's 3 s on top of the warm-up's (under a second), rounded up
    assert default - address_space >= (base.memory_bytes - tight.memory_bytes) * 0.9


def test_a_job_asking_for_a_gpu_on_a_host_without_one_runs_on_the_cpu(spawn_sandbox):
    assert spawn_sandbox.runner.gpu_slots == []
    assert run_json(spawn_sandbox, "import json, os; print(json.dumps(sorted(os.listdir('/dev'))))",
                    gpu=True) == ["fd", "full", "null", "random", "shm", "stderr", "stdin", "stdout", "urandom",
                                  "zero"]


def test_the_default_settings_start_as_before_without_gpu_slots(settings):
    runner = LocalRunner(settings, eager=False)
    asyncio.run(runner.start())
    config = runner._server_config()
    assert (config["pool"], config["gpu_slots"], runner._gpu_sem) == ("prefork", [], None)


def test_asking_for_gpu_slots_on_a_host_without_a_gpu_fails_at_start(settings):
    runner = LocalRunner(settings.model_copy(update={"gpu_devices": "0"}), eager=False)
    with pytest.raises(GpuConfigError, match="COURSE_GPU_DEVICES=0"):
        asyncio.run(runner.start())


def test_course_serve_refuses_in_one_line_when_gpu_slots_cannot_be_had(tmp_path):
    env = {**os.environ, "COURSE_GPU_DEVICES": "0", "COURSE_DATABASE_URL": f"sqlite:///{tmp_path / 'c.db'}"}
    done = subprocess.run([sys.executable, "-m", "app.cli", "serve", "--port", "1"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "COURSE_GPU_DEVICES=0" in done.stderr and "NVML" in done.stderr
