"""Faults on the worker tier, with real processes: a worker SIGKILLed mid-job, Redis stopped for 5 s under traffic,
a web server restarted mid-stream. Real Redis, real PostgreSQL, two `course worker` and two `course serve`
processes; traffic only to 127.0.0.1; every loop bounded in count and time. The tests run in order and each leaves
the tier as it found it (two workers, two web servers, Redis up)."""

from __future__ import annotations

import asyncio
import json
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from sqlalchemy import create_engine, text

from app import ROOT
from tests.support.clients import Learner

pytestmark = pytest.mark.slow

SOLUTION = (ROOT / "exercises" / "same-device" / "solution.py").read_text(encoding="utf-8")
FINAL = {"passed", "failed", "error", "timeout", "rejected"}
# seconds; every wait below is bounded by this, far above what any step takes
BOUND_S = 120


def slow_solution(lines: int, pause_s: float) -> str:
    """The exercise's solution after `lines` numbered lines printed `pause_s` apart (a job that takes a while)."""
    return (f"import time\nfor i in range({lines}):\n    print('line', i, flush=True)\n    time.sleep({pause_s})\n"
            + SOLUTION)


def run(coro):
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, asyncio.wait_for(coro, BOUND_S * 2)).result()


def row(tier, submission_id: str) -> dict:
    engine = create_engine(tier.env["COURSE_DATABASE_URL"])
    try:
        with engine.connect() as conn:
            found = conn.execute(text("SELECT status, attempt, worker, verdict FROM submissions WHERE id = :id"),
                                 {"id": submission_id}).mappings().one()
            return dict(found)
    finally:
        engine.dispose()


def stream_kinds(tier, submission_id: str) -> list[str]:
    entries = tier.redis.xrange(f"course:events:{submission_id}")
    return [json.loads(fields[b"e"])["kind"] for _, fields in entries]


def wait_for(check, what: str):
    deadline = time.monotonic() + BOUND_S
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what} within {BOUND_S} s")


def test_a_worker_killed_mid_job_the_job_finishes_on_the_other_with_one_verdict(running_tier):
    tier = running_tier

    async def scenario():
        async with Learner(tier.web[0]) as learner:
            response = await learner.request("POST", "/api/exercises/same-device/submissions",
                                             json={"code": slow_solution(6, 0.5)})
            assert response.status_code == 202, response.text
            submission_id = response.json()["id"]
            holder = await asyncio.to_thread(wait_for, lambda: (r := row(tier, submission_id))["status"] == "running"
                                             and r["worker"], "a worker took the job")
            pid = int(holder.split(":")[1])
            victim = next(p for p in tier.workers if p.pid == pid)
            await asyncio.to_thread(wait_for, lambda: "output" in stream_kinds(tier, submission_id), "output")
            tier.kill_worker(victim)
            async with learner.client.stream("GET", f"/api/submissions/{submission_id}/events") as events:
                kinds = [line[7:] async for line in events.aiter_lines() if line.startswith("event: ")]
            return submission_id, kinds

    submission_id, kinds = run(scenario())
    assert kinds[-1] == "verdict" and "restart" in kinds, kinds
    stored = row(tier, submission_id)
    assert stored["status"] == "passed" and stored["attempt"] == 2, stored
    assert stream_kinds(tier, submission_id).count("verdict") == 1  # written once, by the second attempt
    tier.start_worker()  # the next test finds two workers again


def test_redis_stopped_for_five_seconds_under_traffic_loses_nothing(running_tier, tier_redis):
    tier = running_tier
    outcomes: list = []

    async def submitter(n: int, stop: asyncio.Event):
        async with Learner(tier.web[n % 2], timeout=BOUND_S) as learner:
            for _ in range(40):
                if stop.is_set():
                    return
                try:
                    outcomes.append(await learner.submit("same-device", SOLUTION))
                except httpx.HTTPError as exc:  # a refused connection is a failure of the test, said plainly
                    outcomes.append(exc)
                await asyncio.sleep(0.2)

    async def scenario():
        stop = asyncio.Event()
        traffic = [asyncio.create_task(submitter(n, stop)) for n in range(4)]
        await asyncio.sleep(2)
        await asyncio.to_thread(tier_redis.stop)
        async with Learner(tier.web[1]) as prober:  # one submission surely made during the outage
            refused = await prober.request("POST", "/api/exercises/same-device/submissions", json={"code": SOLUTION})
        await asyncio.sleep(5)
        await asyncio.to_thread(tier_redis.start)
        await asyncio.sleep(3)
        stop.set()
        await asyncio.gather(*traffic)
        return refused

    refused = run(scenario())
    assert refused.status_code == 503 and refused.headers["retry-after"]
    assert "cannot be reached" in refused.json()["detail"] and "Nothing was stored" in refused.json()["detail"]
    assert not [o for o in outcomes if isinstance(o, Exception)], outcomes
    statuses = {o.http_status for o in outcomes}
    assert statuses <= {202, 503}, statuses  # accepted, or refused during the outage
    accepted = [o for o in outcomes if o.http_status == 202]
    assert accepted and all(o.verdict and o.verdict["status"] == "passed" for o in accepted), \
        [o.verdict for o in accepted if not o.verdict or o.verdict["status"] != "passed"]
    engine = create_engine(tier.env["COURSE_DATABASE_URL"])
    with engine.connect() as conn:
        unfinished = conn.execute(text("SELECT count(*) FROM submissions WHERE status IN ('queued', 'running')"))
        assert unfinished.scalar() == 0
    engine.dispose()


def test_a_restarted_web_server_the_client_reconnects_and_gets_the_rest(running_tier):
    tier = running_tier
    url = tier.web[0]

    async def scenario():
        async with Learner(url, timeout=BOUND_S) as learner:
            response = await learner.request("POST", "/api/exercises/same-device/submissions",
                                             json={"code": slow_solution(10, 0.4)})
            submission_id = response.json()["id"]
            events, last_id, restarted = [], None, False
            for _ in range(50):  # connections: the first, then one per reconnect
                headers = {"Last-Event-ID": last_id} if last_id else {}
                try:
                    async with learner.client.stream("GET", f"/api/submissions/{submission_id}/events",
                                                     headers=headers) as stream:
                        fields: dict[str, str] = {}
                        async for line in stream.aiter_lines():
                            if line:
                                name, _, value = line.partition(": ")
                                fields[name] = value
                                continue
                            if "data" in fields:  # a blank line ends an event, as EventSource reads it
                                events.append((fields["event"], json.loads(fields["data"])))
                                last_id = fields.get("id", last_id)
                            fields = {}
                            if len(events) == 2 and not restarted:
                                break  # mid-stream: now restart the server
                    if events and events[-1][0] == "verdict":
                        return events, restarted
                    if not restarted:
                        restarted = True
                        await asyncio.to_thread(tier.restart_web, 0)
                except httpx.HTTPError:
                    await asyncio.sleep(0.5)  # the server is still starting: reconnect, as EventSource does
            raise AssertionError(f"no verdict after reconnecting: {events}")

    events, restarted = run(scenario())
    assert restarted
    lines = [item["line"] for kind, data in events if kind == "output" for item in data["lines"]]
    # every line once, in order, across the restart (the solution's own print comes last)
    assert lines[:10] == [f"line {i}" for i in range(10)] and len(lines) == 11, lines
    assert events[-1][0] == "verdict" and events[-1][1]["status"] == "passed"
    assert [kind for kind, _ in events].count("verdict") == 1

