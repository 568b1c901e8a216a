"""Throughput under load: many learners submitting while others read lessons, against the real server.

`load_run` is shared by the short load test in `make test` (tests/load/) and the full run here in `make bench`
(32 submitters x 10 solutions, 50 readers, each pausing `READER_THINK_S` between pages: a class reading). It
reports verdicts per second, submission latency, the readers' page latency under that load, and how many accepted
submissions were lost (no verdict, or a verdict that the database does not hold).
Its baseline, in the same run: `raw_jobs_per_s`, the same mix of solutions graded straight on a LocalRunner of the
site's concurrency (`grade_submission`, no web, no database), as many in flight as submitters;
`load_capacity_share` in the summary is verdicts/s over it.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from app.content.exercises import load_exercise
from app.core.config import ROOT, Settings
from app.grading import grade_submission
from app.main import open_runner
from tests.support.clients import EXERCISES, Learner, ReaderStats, read_pages, solutions
from tests.support.servers import site_server

SUBMITTERS = 32
PER_SUBMITTER = 10
READERS = 50
# Seconds each reader pauses between two pages: the readers model a class of learners reading lessons while others
# submit, and a learner reads a page every few seconds at the very most (skimming from lesson to exercise; reading
# one takes minutes), so 50 readers offer at most 25 pages/s. Before (no pause) each reader fetched its next page
# as soon as the last arrived: 50 httpx clients reading flat out were a load generator whose own CPU was ~43% of
# what each verdict cost on the 2-core machine (bench/README.md), so `load_capacity_share` measured the benchmark's
# client more than the site. The short load test (tests/load/) keeps its readers flat out: it checks correctness
# under as much concurrency as it can make, not a rate.
READER_THINK_S = 2.0
# submissions per minute per learner and per address (every client is 127.0.0.1) must not limit a load test
SERVER_ENV = {"COURSE_SUBMISSION_RATE_LIMIT": "10000/minute", "COURSE_SUBMISSION_ADDRESS_RATE_LIMIT": "10000/minute"}


async def _submitter(base: str, n: int, count: int, codes: dict[str, str]) -> dict:
    async with Learner(base) as learner:
        outcomes = []
        for i in range(count):
            slug = EXERCISES[(n + i) % len(EXERCISES)]
            outcomes.append(await learner.submit(slug, codes[slug]))
        stored = []
        for o in outcomes:
            if o.submission_id:
                response = await learner.request("GET", f"/api/submissions/{o.submission_id}")
                stored.append((o.submission_id, response.status_code, response.json().get("status")))
        return {"outcomes": outcomes, "stored": stored, "progress": await learner.progress()}


async def load_run(base: str, *, submitters: int, per_submitter: int, readers: int, think_s: float = 0.0) -> dict:
    """Run submitters and readers at once against base; return every outcome and the reader stats.

    think_s: each reader's pause between pages (`read_pages`); 0 reads flat out."""
    codes = solutions()
    stop = asyncio.Event()
    reads = ReaderStats()
    reading = asyncio.create_task(read_pages(base, readers, stop, reads, think_s=think_s))
    start = time.perf_counter()
    try:
        learners = await asyncio.gather(*(_submitter(base, n, per_submitter, codes) for n in range(submitters)))
    finally:
        elapsed = time.perf_counter() - start
        stop.set()
        await reading
    return {"learners": learners, "reads": reads, "seconds": elapsed}


def lost(learner: dict) -> int:
    """Count accepted submissions that came back without a final verdict or are not stored as finished."""
    finals = {"passed", "failed", "error", "timeout", "rejected"}
    missing = sum(1 for o in learner["outcomes"]
                  if o.http_status == 202 and (o.verdict or {}).get("status") not in finals)
    unstored = sum(1 for _id, code, status in learner["stored"] if code != 200 or status not in finals)
    return missing + unstored


def summarise(run: dict) -> dict:
    """Turn a load run into figures."""
    outcomes = [o for learner in run["learners"] for o in learner["outcomes"]]
    verdicts = [o for o in outcomes if o.verdict]
    latencies = sorted(o.seconds * 1000 for o in verdicts)
    pct = lambda p: latencies[min(len(latencies) - 1, int(round(p / 100 * (len(latencies) - 1))))]  # noqa: E731
    return {
        "submissions": len(outcomes),
        "verdicts": len(verdicts),
        "passed": sum(1 for o in verdicts if o.verdict["status"] == "passed"),
        "verdicts_per_s": round(len(verdicts) / run["seconds"], 2),
        "submission_p50_ms": round(pct(50), 1) if latencies else None,
        "submission_p95_ms": round(pct(95), 1) if latencies else None,
        "lost_submissions": sum(lost(learner) for learner in run["learners"]),
        "server_errors": sum(1 for o in outcomes if o.http_status >= 500)
        + sum(n for code, n in run["reads"].statuses.items() if code >= 500),
        "page_reads": len(run["reads"].latencies_ms),
        "page_p99_under_load_ms": round(run["reads"].pct(99), 1),
        "page_p50_under_load_ms": round(run["reads"].pct(50), 1),
        "seconds": round(run["seconds"], 1),
    }


RAW_JOBS = 96  # graded jobs in the raw baseline (after one warm-up job per exercise)


async def raw_jobs_per_s(submitters: int = SUBMITTERS, jobs: int = RAW_JOBS) -> float:
    """Grade the load's mix of solutions straight on a warm LocalRunner, `submitters` at a time; return jobs/s."""
    exercises = [load_exercise(ROOT / "exercises" / slug) for slug in EXERCISES]
    async with open_runner(Settings(env="test", secret_key="bench", runner_queue_size=10_000)) as runner:
        for exercise in exercises:  # the fork server starts with the first job: not part of the figure
            await grade_submission(exercise, exercise.solution, runner)
        queue = [exercises[i % len(exercises)] for i in range(jobs)]

        async def worker() -> None:
            while queue:
                exercise = queue.pop()
                await grade_submission(exercise, exercise.solution, runner)

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(submitters)))
        return round(jobs / (time.perf_counter() - start), 2)


def run(submitters: int = SUBMITTERS, per_submitter: int = PER_SUBMITTER, readers: int = READERS,
        repeats: int = 3) -> dict:
    """Measure sustained verdict throughput with the real server (median of `repeats` runs)."""
    rows = []
    for _ in range(repeats):
        # timed from a warm site, as the raw baseline is (its fork server's start is not part of its figure): a
        # load that starts while the site still warms up (several seconds) counts the warm-up as lost throughput
        with tempfile.TemporaryDirectory() as tmp, site_server(Path(tmp), until_ready=True, **SERVER_ENV) as (base, _):
            rows.append(summarise(asyncio.run(load_run(base, submitters=submitters, per_submitter=per_submitter,
                                                       readers=readers, think_s=READER_THINK_S))))
    out = {key: statistics.median(r[key] for r in rows) for key in rows[0] if isinstance(rows[0][key], (int, float))}
    out["lost_submissions"] = sum(r["lost_submissions"] for r in rows)
    out["raw_jobs_per_s"] = asyncio.run(raw_jobs_per_s(submitters))
    out.update(submitters=submitters, per_submitter=per_submitter, readers=readers, repeats=repeats,
               reader_think_s=READER_THINK_S)
    out["targets"] = {"lost_submissions": {"target": "== 0", "met": out["lost_submissions"] == 0},
                      "server_errors": {"target": "== 0", "met": out["server_errors"] == 0}}
    return out


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=1))
