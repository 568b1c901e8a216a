"""CPU of the whole machine per graded job, per exercise of the load's mix, with the sandbox saturated.

Issue 31: under load the graded job itself, not the web server, limits the verdicts per second on 2 cores. This
counts every process the job costs, CPU time not wall (other work on the host does not enter it):
- the fork server's own CPU (its pipes, the job's cgroups, the pool's bookkeeping);
- the zygote's own CPU (its forks: each copies the page tables of torch's heap);
- every child and what it forked, from fork to reap: the job process (isolation, the session
  built ahead and the page warm-ups while it waits, the graded run, its exit), a graded job's spare
  (app/harness/elsewhere.py), and the pool's refill, since under saturation every job consumes a waiting child;
- this process (the LocalRunner's side and the verdict decided outside the sandbox), as `client_ms`.

The sandbox tree is summed from /proc/<pid>/stat (utime + stime of every live process, plus cutime + cstime: what
its reaped children spent), once the pool has settled (no process of the tree spends CPU any more) before and
after JOBS graded jobs of one exercise, SUBMITTERS at a time (more than the runner's concurrency: every job takes
a waiting child and the pool refills behind it). Kernel clock ticks (10 ms) over JOBS jobs: resolution
10 / JOBS ms. Writes bench/results/jobcpu.json.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

from app.content.exercises import load_exercise
from app.core.config import ROOT, Settings
from app.grading import grade_submission
from app.main import open_runner
from tests.support.clients import EXERCISES

RESULTS = Path(__file__).parent / "results"
JOBS = 32  # graded jobs per exercise
SUBMITTERS = 4  # at once: twice the runner's concurrency, so no child waits idle
WARMUP = 2  # graded jobs per exercise before counting (the fork server starts with the first)
TICK_S = 1 / os.sysconf("SC_CLK_TCK")
SETTLE_S = 0.6  # the tree is settled when it spent nothing in this long (the pool's refill done)


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()  # fields from the 3rd (state) on: the name may hold spaces


def tree_cpu(root: int) -> tuple[float, float, float]:
    """Return (CPU seconds of root's whole tree, root's own, its children's own): every live process's utime +
    stime + cutime + cstime (see proc(5): fields 14-17); a live process's live children are not in its cutime."""
    children: dict[int, list[tuple[int, list[str]]]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (fields := _stat(int(name))) is not None:
            children.setdefault(int(fields[1]), []).append((int(name), fields))
    own = _stat(root) or ["0"] * 15
    total, root_own = sum(int(x) for x in own[11:15]), int(own[11]) + int(own[12])
    first_own = 0
    stack = [(pid, fields, 1) for pid, fields in children.get(root, [])]
    while stack:
        pid, fields, depth = stack.pop()
        total += sum(int(x) for x in fields[11:15])
        if depth == 1:
            first_own += int(fields[11]) + int(fields[12])
        stack += [(p, f, depth + 1) for p, f in children.get(pid, [])]
    return total * TICK_S, root_own * TICK_S, first_own * TICK_S


def settle(root: int) -> tuple[float, float, float]:
    """Wait until the tree spends no more CPU (refill finished); return tree_cpu then."""
    last = tree_cpu(root)
    while True:
        time.sleep(SETTLE_S)
        now = tree_cpu(root)
        if now[0] == last[0]:
            return now
        last = now


async def _measure(jobs: int, submitters: int) -> dict:
    figures = {}
    async with open_runner(Settings(env="test", secret_key="bench", runner_queue_size=10_000)) as runner:
        exercises = {slug: load_exercise(ROOT / "exercises" / slug) for slug in EXERCISES}
        for exercise in exercises.values():
            for _ in range(WARMUP):
                await grade_submission(exercise, exercise.solution, runner)
        server = runner.server_pid
        for slug, exercise in exercises.items():
            tree0, server0, zygote0 = settle(server)
            client0 = time.process_time()
            left, statuses = list(range(jobs)), set()

            async def submitter() -> None:
                while left:
                    left.pop()
                    statuses.add((await grade_submission(exercise, exercise.solution, runner)).status)

            await asyncio.gather(*(submitter() for _ in range(submitters)))
            client1 = time.process_time()
            tree1, server1, zygote1 = settle(server)
            per_job = lambda a, b: round((b - a) / jobs * 1000, 2)  # noqa: E731
            figures[slug] = {"sandbox_ms": per_job(tree0, tree1), "server_ms": per_job(server0, server1),
                             "zygote_ms": per_job(zygote0, zygote1), "client_ms": per_job(client0, client1),
                             "statuses": sorted(statuses)}
    return figures


def run(jobs: int = JOBS, submitters: int = SUBMITTERS) -> dict:
    """Measure the CPU per graded job of each exercise; write bench/results/jobcpu.json."""
    per = asyncio.run(_measure(jobs, submitters))
    mix = {key: round(sum(f[key] for f in per.values()) / len(per), 2)
           for key in ("sandbox_ms", "server_ms", "zygote_ms", "client_ms")}
    figures = {"jobs_per_exercise": jobs, "submitters": submitters, "exercises": per, "mix": mix}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "jobcpu.json").write_text(json.dumps(figures, indent=2) + "\n")
    return figures


def table(f: dict) -> str:
    """Print the figures as a small table."""
    rows = [f"  CPU ms per graded job, {f['jobs_per_exercise']} jobs/exercise, {f['submitters']} at once"
            "     sandbox  (server  zygote)  client"]
    for slug, e in [*f["exercises"].items(), ("mix (mean)", f["mix"])]:
        rows.append(f"  {slug:<56}{e['sandbox_ms']:>8}  ({e['server_ms']:>6}  {e['zygote_ms']:>6})  "
                    f"{e['client_ms']:>6}")
    return "\n".join(rows)
