"""`course run` and `course doctor` through the real command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import side_by_side

COURSE = [str(Path(sys.executable).with_name("course"))]


def course(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COURSE_ENV": "development"}
    return subprocess.run([*COURSE, *args], capture_output=True, text=True, timeout=240, env=env)


def test_course_run_prints_output_and_mirrors_exit_code(tmp_path: Path):
    script = tmp_path / "hello.py"
    script.write_text("import torch, sys\nprint('sum', torch.ones(3).sum().item())\nprint('oops', file=sys.stderr)\n"
                      "sys.exit(3)\n")
    proc = course("run", str(script))
    assert proc.returncode == 3
    assert proc.stdout == "sum 3.0\n" and "oops" in proc.stderr


def test_course_run_json(tmp_path: Path):
    script = tmp_path / "loop.py"
    script.write_text("print('hi')\n")
    proc = course("run", "--json", str(script))
    data = json.loads(proc.stdout)
    assert proc.returncode == 0
    assert set(data) == {"status", "exit_code", "signal", "stdout", "stderr", "duration_ms", "limit_hit"}
    assert (data["status"], data["exit_code"], data["stdout"], data["limit_hit"]) == ("ok", 0, "hi\n", None)


def test_course_run_nproc_runs_ranks_like_torchrun(tmp_path: Path):
    script, failing = tmp_path / "ddp.py", tmp_path / "failing" / "ddp.py"  # two runs side by side: two files
    script.write_text("import os, torch, torch.distributed as dist\n"
                      "dist.init_process_group('nccl')\n"
                      "rank = dist.get_rank()\n"
                      "torch.cuda.set_device(rank)\n"
                      "total = torch.tensor([rank + 1.0], device='cuda')\n"
                      "dist.all_reduce(total)\n"
                      "print(rank, total.device, total.item(), torch.cuda.device_count(), dist.get_backend())\n"
                      "dist.destroy_process_group()\n")
    failing.parent.mkdir()
    failing.write_text("import os\nraise SystemExit(int(os.environ['RANK']) * 4)\n")
    proc, failed = side_by_side(lambda: course("run", "--nproc", "2", str(script)),
                                lambda: course("run", "--nproc-per-node", "2", str(failing)))
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.splitlines()) == ["[default0]:0 cuda:0 3.0 2 nccl", "[default1]:1 cuda:1 3.0 2 nccl"]
    assert failed.returncode == 1 and "ddp.py FAILED" in failed.stderr  # torchrun's exit code and summary


def test_course_run_refuses_non_utf8(tmp_path: Path):
    script = tmp_path / "latin1.py"
    script.write_bytes(b"print('\xe9')\n")
    proc = course("run", str(script))
    assert proc.returncode == 2 and "not UTF-8" in proc.stderr


@pytest.mark.slow  # starts a sandbox and probes it
def test_course_doctor_reports_layers_limits_and_devices():
    proc = course("doctor")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for layer in ("mount namespace + read-only root", "pid namespace", "network namespace", "seccomp filter",
                  "unprivileged uid per slot", "cgroup memory", "cgroup pids", "rlimits"):
        assert f"[on ] {layer}" in out
    assert "wall clock  10 s" in out and "memory      1024 MiB" in out
    assert "cpu: available" in out and "cuda:" in out
    assert "Simulated machines" in out and "* h100" in out and "  t4 " in out
    assert "AF_INET socket denied" in out and "seccomp mode 2" in out


def test_course_run_nnodes_starts_two_machines(tmp_path: Path):
    script = tmp_path / "envs.py"
    script.write_text("import os\nprint(os.environ['RANK'], os.environ['GROUP_RANK'])\n")
    done = course("run", "--nnodes", "2", "--nproc-per-node", "2", str(script))
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.splitlines()) == ["node0: [default0]:0 0", "node0: [default1]:1 0",
                                                "node1: [default0]:2 1", "node1: [default1]:3 1"]
    too_many = course("run", "--nnodes", "3", "--nproc-per-node", "3", str(script))
    assert too_many.returncode == 2 and "9 ranks; a job runs at most 8" in too_many.stderr


def test_course_run_launcher_accelerate(tmp_path: Path):
    script = tmp_path / "acc.py"
    script.write_text("from accelerate import Accelerator\na = Accelerator()\n"
                      "print(a.process_index, a.device, a.distributed_type)\n")
    done = course("run", "--launcher", "accelerate", "--nproc-per-node", "2", str(script))
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.splitlines()) == ["0 cuda:0 DistributedType.MULTI_GPU",
                                                "1 cuda:1 DistributedType.MULTI_GPU"]
    wrong = course("run", "--cpu", str(script))
    assert wrong.returncode == 2 and "give --launcher accelerate with it" in wrong.stderr
