"""Every limit ends a job with its own, clear limit_hit and a marker line."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from app.runner import Job, Rejected
from app.runner.base import check_source
from app.sandbox.job_limits import Limits

MiB = 1 << 20


def test_limits_come_from_settings(sandbox_settings):
    limits = Limits.from_settings(sandbox_settings)
    assert limits.wall_s == sandbox_settings.sandbox_wall_s and limits.pids == sandbox_settings.sandbox_pids
    assert Limits.from_dict(limits.to_dict()) == limits


def test_defaults_match_the_issue():
    limits = Limits()
    assert (limits.wall_s, limits.cpu_s, limits.memory_bytes, limits.pids, limits.output_bytes,
            limits.source_bytes) == (10.0, 10, 1 << 30, 64, 1 << 20, 64 << 10)


def test_wall_clock(sandbox):
    r = sandbox.run_code("import time\nprint('start', flush=True)\ntime.sleep(30)", wall_s=1)
    assert (r.status, r.limit_hit) == ("limit", "wall")
    assert r.stdout == "start\n" and "wall-clock limit of 1 s" in r.stderr and r.duration_ms < 3000


def test_cpu_time(sandbox):
    r = sandbox.run_code("while True: pass", cpu_s=1, wall_s=10)
    assert (r.status, r.limit_hit) == ("limit", "cpu")
    assert "CPU time limit of 1 s" in r.stderr


def test_memory_by_cgroup(sandbox):
    code = "keep = []\nwhile True:\n    keep.append(b'x' * (32 << 20))"
    r = sandbox.run_code(code, memory_bytes=192 * MiB)
    assert (r.status, r.limit_hit) == ("limit", "memory")
    assert "memory limit of 192 MiB" in r.stderr


def test_memory_single_huge_allocation(sandbox):
    r = sandbox.run_code("x = bytearray(16 << 30)", memory_bytes=256 * MiB)
    assert (r.status, r.limit_hit) == ("limit", "memory") and "MemoryError" in r.stderr


def test_output_cap(sandbox):
    r = sandbox.run_code("while True: print('y' * 99)", output_bytes=64 << 10)
    assert (r.status, r.limit_hit) == ("limit", "output")
    assert len(r.stdout.encode()) <= 64 << 10 and "output limit of 64 KiB" in r.stderr


def test_pids(sandbox):
    code = ("import os, time\nkids = 0\nwhile True:\n    try:\n        if os.fork() == 0:\n            time.sleep(5)\n"
            "            os._exit(0)\n        kids += 1\n    except OSError:\n        print('refused after', kids)\n"
            "        break")
    r = sandbox.run_code(code, pids=8)
    assert (r.status, r.limit_hit) == ("limit", "pids")
    assert "refused after" in r.stdout and "process/thread limit of 8" in r.stderr


def test_after_a_refused_fork_the_next_ones_are_refused_before_the_copy(sandbox):
    """The pids cgroup refuses a fork only after the kernel copied the process (2.6-3.0 ms of CPU for one with torch
    loaded), RLIMIT_NPROC before it. The job starts with the rlimit as a backstop at 4x the limit; once the cgroup has
    refused, and counted, a fork, the server lowers the rlimit of the job's processes to the limit
    (server.refuse_forks_early), and the learner is still told which limit it was."""
    if not sandbox.runner.info["layers"].get("cgroup pids"):
        pytest.skip("no pids cgroup here: the rlimit is the limit from the start")
    code = ("import os, resource, time\n"
            "before = resource.getrlimit(resource.RLIMIT_NPROC)\n"
            "while True:\n"
            "    try:\n"
            "        if os.fork() == 0:\n"
            "            time.sleep(5)\n"
            "            os._exit(0)\n"
            "    except OSError:\n"
            "        break\n"
            "deadline = time.monotonic() + 4\n"
            "while resource.getrlimit(resource.RLIMIT_NPROC) == before and time.monotonic() < deadline:\n"
            "    time.sleep(0.01)\n"
            "print('nproc', before, resource.getrlimit(resource.RLIMIT_NPROC))\n")
    r = sandbox.run_code(code, pids=8)
    assert (r.status, r.limit_hit) == ("limit", "pids") and "process/thread limit of 8" in r.stderr
    assert "nproc (32, 32) (8, 8)" in r.stdout, r


def _job_groups(server_pid: int) -> list[Path]:
    """The job groups under the fork server's own pids group (cgroup v1), [] where it has none."""
    mounts = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        if right.split()[:1] == ["cgroup"] and "pids" in right.split()[2].split(","):
            mounts["pids"] = left.split()[4]
    if "pids" not in mounts:
        return []
    # os.walk, not Path.rglob: job groups (this server's being retired, and other servers' of other test workers)
    # are removed while the tree is walked, and rglob raises FileNotFoundError for a directory gone between its
    # listing and its scan (100 errors in 3,000 walks beside a loop that makes and removes groups); os.walk skips it
    prefix = f"course-sbx-{server_pid}-"
    return sorted(Path(top) / d for top, dirs, _ in os.walk(mounts["pids"])
                  if os.path.basename(top).startswith(prefix) for d in dirs if d.startswith("job-"))


def _empty(group: Path) -> bool:
    """Whether a job group holds no process; a group removed meanwhile (reading its cgroup.procs then fails with
    ENOENT, or ENODEV while the kernel takes it down) is not one left behind."""
    try:
        return not (group / "cgroup.procs").read_text().split()
    except OSError:
        return False


def test_a_finished_jobs_groups_are_removed_after_its_result(sandbox):
    """The server removes a job's cgroups once its result is out (ForkServer.retire), its stragglers killed first:
    soon after a job that left processes behind, every job group left belongs to a live (waiting) child."""
    if os.getuid() != 0 or not _job_groups(sandbox.runner.server_pid):
        pytest.skip("needs root and the cgroup v1 pids controller")
    code = "import os, time\nfor _ in range(3):\n    if os.fork() == 0:\n        time.sleep(30)\nprint('left')"
    for _ in range(3):
        assert sandbox.run_code(code).stdout.count("left") == 1
    deadline = time.monotonic() + 10
    while True:
        empty = [g for g in _job_groups(sandbox.runner.server_pid) if _empty(g)]
        if not empty or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert not empty, f"groups of finished jobs were left behind: {empty}"


def test_source_size_is_rejected_before_running(sandbox):
    big = "x = 1\n" * 20000  # ~117 KiB
    r = sandbox.run_code(big)
    assert (r.status, r.limit_hit) == ("limit", "source") and "the limit is 64 KiB" in r.message
    with pytest.raises(Rejected, match="the limit is 64 KiB"):
        check_source(Job(code=big), Limits())


def test_non_utf8_source_is_rejected():
    with pytest.raises(Rejected, match="not valid UTF-8"):
        check_source(Job(code="print('\udcff')"), Limits())


def test_exit_code_and_signal_are_reported(sandbox):
    r = sandbox.run_code("import sys\nsys.exit(7)")
    assert (r.status, r.exit_code, r.signal, r.limit_hit) == ("failed", 7, None, None)
    r = sandbox.run_code("import ctypes\nctypes.string_at(0)")  # segfault
    assert (r.status, r.exit_code, r.signal) == ("failed", None, 11) and "SIGSEGV" in r.message


def test_tmpfs_size(sandbox):
    code = ("n = 0\ntry:\n    with open('/tmp/f', 'wb') as f:\n        while True:\n            f.write(b'0' * 65536)\n"
            "            n += 65536\nexcept OSError as e:\n    print(n >> 20, e.errno)")
    r = sandbox.run_code(code, tmpfs_bytes=4 * MiB)
    assert r.status == "ok" and int(r.stdout.split()[0]) <= 4
