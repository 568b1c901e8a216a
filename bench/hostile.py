"""Hostile programs under load: a fork bomb, a memory bomb, a CPU spin and an output flood run while 20 clients
read lesson pages, against the real site (uvicorn, its own SQLite file, the embedded sandbox).

Each program is submitted through the HTTP API as a `same-device` submission, so it takes the learner's path:
queue, sandbox, grader, stored verdict. `hostile_run` is shared by the short test in `make test`
(tests/load/test_hostile_under_load.py, a shorter wall-clock limit, no timing assertion) and `run()` here in
`make bench`, which reports page latency under this load against the target (p99 < 100 ms), beside the same readers
for the same time with no job running (the baseline, measured in the same run), and whether every hostile job
ended within its limits. The readers are closed-loop clients on the same machine: on a small host much of their
latency is their own queueing, which the baseline shows.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from tests.support.clients import Learner, ReaderStats, read_pages
from tests.support.servers import site_server

READERS = 20
# seconds each reader pauses between pages: 20 readers then offer at most ~200 pages/s, below what this server
# does on two cores, so p99 shows what hostile jobs do to page latency rather than the readers' own queueing
THINK_S = 0.1
# each round's p99 is the ~19th slowest of ~1,900 reads, and moves 11-18 ms between rounds of the same run, quiet or
# not: 5 rounds' median kept hostile_p99_ratio within 1.05-1.11 on three runs of the same code, where 3 rounds' read
# 1.05-1.31 across runs (bench/README.md, "hostile_p99_ratio's rounds"); each round more is ~20 s of `make bench`
ROUNDS = 5
TARGET_P99_MS = 100.0
# seconds past the wall-clock limit a hostile job may take to come back as a verdict (kill, reap, grade, store)
GRACE_S = 15.0
# every hostile job runs at once, so its time is its own and not its place in the queue
SERVER_ENV = {"COURSE_RUNNER_CONCURRENCY": "4", "COURSE_SUBMISSION_RATE_LIMIT": "10000/minute",
              "COURSE_SUBMISSION_ADDRESS_RATE_LIMIT": "10000/minute"}
# the same programs as tests/security/programs/, shortened; each must end in a timeout or a failed verdict
PROGRAMS = {
    "fork_bomb": ("import os, time\n"
                  "while True:\n"
                  "    try:\n"
                  "        os.fork()\n"
                  "    except OSError:\n"
                  "        time.sleep(0.01)\n"),
    "memory_bomb": "b = bytearray(8 << 30)\nprint('GOT 8 GiB', len(b))\n",
    "cpu_spin": "while True:\n    pass\n",
    "output_flood": ("import sys\n"
                     "line = 'x' * 1023 + '\\n'\n"
                     "for _ in range(200 * 1024):\n"
                     "    sys.stdout.write(line)\n"
                     "print('FINISHED FLOOD')\n"),
}
ENDINGS = {"timeout", "failed"}
LESSONS = ("cpu-gpu-border", "picking-a-device", "multi-gpu-and-distributed", "training-loop")


async def _hostile_job(base: str, name: str, code: str) -> dict:
    async with Learner(base) as learner:
        outcome = await learner.submit("same-device", code)
    verdict = outcome.verdict or {}
    return {"program": name, "http_status": outcome.http_status, "status": verdict.get("status"),
            "seconds": round(outcome.seconds, 2), "stderr_tail": (verdict.get("stderr") or "")[-300:]}


async def hostile_round(base: str, readers: int = READERS) -> dict:
    """Run the four hostile programs at once while `readers` clients read lessons; return jobs and reads."""
    async with Learner(base) as warm:  # first renders are not what this measures
        for slug in LESSONS:
            await warm.request("GET", f"/lessons/{slug}")
    stop = asyncio.Event()
    reads = ReaderStats()
    reading = asyncio.create_task(read_pages(base, readers, stop, reads, lessons=LESSONS, think_s=THINK_S))
    started = time.monotonic()
    try:
        jobs = await asyncio.gather(*(_hostile_job(base, name, code) for name, code in PROGRAMS.items()))
    finally:
        stop.set()
        await reading
    return {"jobs": list(jobs), "reads": reads, "seconds": time.monotonic() - started}


async def quiet_round(base: str, seconds: float, readers: int = READERS) -> ReaderStats:
    """The baseline: the same readers for the same time with no job running; return their reads."""
    stop = asyncio.Event()
    reads = ReaderStats()
    reading = asyncio.create_task(read_pages(base, readers, stop, reads, lessons=LESSONS, think_s=THINK_S))
    await asyncio.sleep(seconds)
    stop.set()
    await reading
    return reads


def within_limits(job: dict, wall_s: float) -> bool:
    """True when a hostile job was accepted and ended with a timeout or failed verdict within wall + grace."""
    return job["http_status"] == 202 and job["status"] in ENDINGS and job["seconds"] <= wall_s + GRACE_S


def hostile_run(workdir: Path, *, rounds: int = 1, readers: int = READERS, wall_s: float | None = None,
                baseline: bool = False) -> dict:
    """Start the site in workdir and run `rounds` hostile rounds (each followed by a quiet one of the same length
    when `baseline`); return every round's jobs and reads."""
    env = dict(SERVER_ENV)
    if wall_s is not None:
        env["COURSE_SANDBOX_WALL_S"] = str(wall_s)
    # from a warm site: the warm-up (torch's import, a first graded job) would otherwise share the first round's
    # cores with the readers and count as what hostile jobs do to pages
    with site_server(workdir, until_ready=True, **env) as (base, _proc):
        done = []
        for _ in range(rounds):
            done.append(asyncio.run(hostile_round(base, readers)))
            if baseline:
                done[-1]["quiet"] = asyncio.run(quiet_round(base, done[-1]["seconds"], readers))
        return {"rounds": done}


def figures(result: dict, wall_s: float) -> dict:
    """Turn hostile rounds into figures: page p50/p99 (median over rounds) and whether every job kept its limits."""
    rounds = result["rounds"]
    p50 = statistics.median(r["reads"].pct(50) for r in rounds)
    p99 = statistics.median(r["reads"].pct(99) for r in rounds)
    jobs = [job for r in rounds for job in r["jobs"]]
    quiet = {}
    if all("quiet" in r for r in rounds):
        quiet_p99 = statistics.median(r["quiet"].pct(99) for r in rounds)
        quiet = {"quiet_page_p50_ms": round(statistics.median(r["quiet"].pct(50) for r in rounds), 1),
                 "quiet_page_p99_ms": round(quiet_p99, 1),
                 "hostile_p99_ratio": round(p99 / quiet_p99, 2) if quiet_p99 else None}
    return {
        **quiet,
        "hostile_page_p50_ms": round(p50, 1),
        "hostile_page_p99_ms": round(p99, 1),
        "hostile_page_reads": sum(len(r["reads"].latencies_ms) for r in rounds),
        "hostile_page_non_200": sum(n for r in rounds for code, n in r["reads"].statuses.items() if code != 200),
        "hostile_jobs_within_limits": all(within_limits(job, wall_s) for job in jobs),
        "hostile_job_max_s": max(job["seconds"] for job in jobs),
        "hostile_job_statuses": {job["program"]: job["status"] for job in rounds[-1]["jobs"]},
        "targets": {"hostile_page_p99_ms": {"target": f"< {TARGET_P99_MS:g}", "met": p99 < TARGET_P99_MS}},
    }


def run() -> dict:
    """Run the hostile programs under load with the default limits, ROUNDS times; return the figures."""
    from app.core.config import Settings

    wall_s = Settings.model_fields["sandbox_wall_s"].default
    with tempfile.TemporaryDirectory() as tmp:
        result = hostile_run(Path(tmp), rounds=ROUNDS, baseline=True)
    return figures(result, wall_s)


def table(fig: dict) -> str:
    """Return the figures as a Markdown table."""
    met = fig["targets"]["hostile_page_p99_ms"]["met"]
    rows = [
        ("lesson page p50 / p99 while 4 hostile jobs run", f"{fig['hostile_page_p50_ms']} / "
                                                           f"{fig['hostile_page_p99_ms']} ms"),
        (f"target p99 < {TARGET_P99_MS:g} ms", "met" if met else "NOT met"),
    ]
    if "quiet_page_p99_ms" in fig:
        rows += [("baseline: same readers, no job running, p50 / p99",
                  f"{fig['quiet_page_p50_ms']} / {fig['quiet_page_p99_ms']} ms"),
                 ("p99 with hostile jobs / p99 without", f"{fig['hostile_p99_ratio']}x")]
    rows += [
        ("page reads (non-200)", f"{fig['hostile_page_reads']} ({fig['hostile_page_non_200']})"),
        ("hostile jobs ended within their limits", "yes" if fig["hostile_jobs_within_limits"] else "NO"),
        ("slowest hostile job (submit to verdict)", f"{fig['hostile_job_max_s']} s"),
        ("verdicts", ", ".join(f"{k}: {v}" for k, v in fig["hostile_job_statuses"].items())),
    ]
    return "\n".join(["| figure | value |", "| --- | --- |", *(f"| {name} | {value} |" for name, value in rows)])


if __name__ == "__main__":
    print(table(run()))
