"""Grading on the worker tier, through the front door: every exercise's solution and one wrong file, over real
HTTP to two web servers, run by two real `course worker` processes, events read back from Redis; and the
`course` commands that run code (grade, run, run with two ranks, doctor) pointed at the same workers."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from app import ROOT
from tests.helpers import parse_sse, side_by_side
from tests.support.clients import Learner

pytestmark = pytest.mark.slow

EXERCISES = sorted(path.parent.name for path in (ROOT / "exercises").glob("*/exercise.yaml"))
# prints one line before it fails the `same_device` check, so its stream has output then a verdict
PRINTS_THEN_FAILS = "print('before the mistake')\n"


def wrong_file(slug: str):
    path = sorted((ROOT / "exercises" / slug / "wrong").glob("*.py"))[0]
    return path.read_text(encoding="utf-8"), path.read_text(encoding="utf-8").splitlines()[0].split(":")[1].strip()


# seconds a scenario may take at most (a verdict that never comes must fail the test, not hang it)
BOUND_S = 300


def run(coro):
    """Run a coroutine in a thread of its own (Playwright's sync API may hold this thread's event loop)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, asyncio.wait_for(coro, BOUND_S)).result()


async def grade_all(base: str) -> dict[str, tuple[dict, dict]]:
    solutions = {slug: (ROOT / "exercises" / slug / "solution.py").read_text(encoding="utf-8") for slug in EXERCISES}
    async with Learner(base) as learner:
        async def both(slug):
            right = await learner.submit(slug, solutions[slug])
            wrong = await learner.submit(slug, wrong_file(slug)[0])
            return slug, (right, wrong)

        return dict(await asyncio.gather(*(both(slug) for slug in EXERCISES)))


def test_every_solution_passes_and_a_wrong_file_fails_its_check(running_tier):
    outcomes = run(grade_all(running_tier.web[0]))
    for slug, (right, wrong) in outcomes.items():
        assert right.http_status == 202 and right.verdict["status"] == "passed", (slug, right.verdict)
        expected = wrong_file(slug)[1]
        assert wrong.verdict["status"] == "failed", (slug, wrong.verdict)
        failed = {c["id"] for c in wrong.verdict["checks"] if not c["passed"]}
        assert expected in failed, (slug, failed)


def test_the_stream_gives_output_then_the_verdict_on_either_web_server(running_tier):
    first, second = running_tier.web
    code = PRINTS_THEN_FAILS + wrong_file("same-device")[0]

    async def scenario():
        async with Learner(first) as learner:
            outcome = await learner.submit("same-device", code)
            cookie = learner.cookie
        async with httpx.AsyncClient(base_url=second, timeout=60, headers={"Cookie": cookie}) as other:
            response = await other.get(f"/api/submissions/{outcome.submission_id}/events")
        return outcome, response

    outcome, response = run(scenario())
    events = parse_sse(response.text)
    kinds = [kind for kind, _ in events]
    assert kinds[0] == "output" and kinds[-1] == "verdict" and set(kinds) == {"output", "verdict"}, kinds
    assert events[0][1]["lines"][0] == {"stream": "stdout", "line": "before the mistake"}  # lines come in batches
    assert events[-1][1]["id"] == outcome.submission_id and events[-1][1]["status"] == "failed"
    assert events[-1][1] == {**outcome.verdict}
    ids = [line.split(": ", 1)[1] for line in response.text.splitlines() if line.startswith("id: ")]
    assert len(ids) == len(events) and all("-" in i for i in ids)  # Redis stream ids, valid on any web server


def course(tier, *args: str) -> subprocess.CompletedProcess:
    """Run the `course` command with the tier's environment (COURSE_RUNNER=celery, its Redis and database)."""
    return subprocess.run([sys.executable, "-m", "app.cli", *args], env=tier.env, cwd=ROOT, capture_output=True,
                          text=True, timeout=BOUND_S)


def test_course_grade_run_and_doctor_go_through_the_workers_too(running_tier, tmp_path):
    program = tmp_path / "two_lines.py"
    program.write_text("import sys\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(3)\n")
    graded, ran, doctor = side_by_side(  # the tier has two workers: two commands' jobs run at once
        lambda: course(running_tier, "grade", "pick-device", str(ROOT / "exercises/pick-device/solution.py"),
                       "--json"),
        lambda: course(running_tier, "run", str(program)),
        lambda: course(running_tier, "doctor", "--json"))
    assert graded.returncode == 0 and json.loads(graded.stdout)["status"] == "passed", graded.stderr
    assert ran.returncode == 3 and ran.stdout == "out\n" and "err" in ran.stderr
    report = json.loads(doctor.stdout)
    assert report["server"]["runner"] == "celery" and len(report["server"]["workers"]) == 2
    assert report["probe"]["status"] == "ok", report["probe"]


def test_course_run_of_two_ranks_runs_them_on_a_worker(running_tier, tmp_path):
    program = tmp_path / "ranks.py"
    program.write_text("import os, torch\n"
                       "print(os.environ['RANK'], os.environ['WORLD_SIZE'], torch.cuda.device_count())\n")
    ran = course(running_tier, "run", "--nproc", "2", str(program))
    assert ran.returncode == 0, ran.stderr
    assert sorted(ran.stdout.splitlines()) == ["[default0]:0 2 2", "[default1]:1 2 2"]


def test_a_flood_on_the_tier_travels_in_batches_and_resumes_exactly(running_tier):
    """On the worker tier too, a flood is a handful of batched entries (one per batch on the job's Redis Stream),
    every line either sent or counted; a page reconnecting with an entry's id gets exactly the entries after it."""
    flood = "i = 0\nwhile True:\n    print('spam', i)\n    i += 1\n"

    async def scenario():
        async with Learner(running_tier.web[0]) as learner:
            outcome = await learner.submit("same-device", flood)
            url = f"/api/submissions/{outcome.submission_id}/events"
            whole = (await learner.request("GET", url)).text
            ids = [line.split(": ", 1)[1] for line in whole.splitlines() if line.startswith("id: ")]
            rest = (await learner.request("GET", url, headers={"Last-Event-ID": ids[1]})).text
            return outcome, whole, rest

    outcome, whole, rest = run(scenario())
    events = parse_sse(whole)
    verdict = events[-1][1]
    printed = verdict["stdout"].splitlines() + verdict["stderr"].splitlines()
    batches = [data for kind, data in events if kind == "output"]
    assert len(printed) > 50_000 and len(events) < 30, (len(printed), len(events))
    assert sum(len(b["lines"]) + b.get("skipped", 0) for b in batches) == len(printed)
    assert any(b.get("capped") for b in batches) and verdict == outcome.verdict
    assert parse_sse(rest) == events[2:]


def test_a_lesson_block_runs_on_a_worker_and_streams_from_the_web_server_that_took_it(running_tier):
    """A lesson block's Run on the tier is a plain job on a worker; its events are followed by the web server that
    took the POST (nothing is stored, so another web server has no run by that id: it says so, 404)."""
    first, second = running_tier.web

    async def scenario():
        async with Learner(first) as learner:
            started = await learner.request("POST", "/api/lessons/cpu-gpu-border/blocks/1/runs",
                                            json={"machine": "t4"})
            assert started.status_code == 202, started.text
            events = await learner.request("GET", started.json()["events"])
            async with httpx.AsyncClient(base_url=second, timeout=60, headers={"Cookie": learner.cookie}) as other:
                elsewhere = await other.get(started.json()["events"])
        return events, elsewhere

    events, elsewhere = run(scenario())
    parsed = parse_sse(events.text)
    assert [kind for kind, _ in parsed][-1] == "done" and parsed[-1][1]["status"] == "ok", parsed
    assert parsed[-1][1]["machine"] == "Colab's T4"
    assert [item["line"] for kind, data in parsed if kind == "output" for item in data["lines"]][:1] == ["cpu"]
    assert elsewhere.status_code == 404 and "of yours" in elsewhere.json()["detail"]
