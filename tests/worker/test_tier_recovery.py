"""The worker tier when a part misbehaves, through the front door, with real processes: Redis, PostgreSQL,
`course worker` and `course serve`. What an operator's terminal gets from `course run`/`course grade` on the tier
(escapes made visible); a worker whose clock is a minute behind (libfaketime) runs each job once; a regrade whose
web server is SIGKILLed is taken over within its lease; a plain `course run` whose worker dies reruns with a marker
line; a page that reconnects after a Redis outage mid-run gets every line. Every wait is bounded."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from app import ROOT
from tests.cli.terminal_attack import ATTACK, assert_nothing_raw, run_on_pty

pytestmark = pytest.mark.slow

# seconds; short, so a dead worker's job runs again within a few seconds
LEASE_S = "3"
# seconds every wait below is bounded by, far above what any step takes
BOUND_S = 180
FAKETIME_LIB = next((p for p in ("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
                                 "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1") if Path(p).exists()), None)
SOLUTION = (ROOT / "exercises" / "same-device" / "solution.py").read_text(encoding="utf-8")


def slow_solution(lines: int, pause_s: float) -> str:
    """The exercise's solution after `lines` numbered lines printed `pause_s` apart."""
    return (f"import time\nfor i in range({lines}):\n    print('line', i, flush=True)\n    time.sleep({pause_s})\n"
            + SOLUTION)


@pytest.fixture(scope="module")
def tier(tier_redis, postgres_server, postgres_template, tmp_path_factory):
    """One web server and no worker yet: each test starts the workers it needs (one with a skewed clock, say)."""
    from tests.support.tier import tier as start_tier

    url = postgres_server.create_database(f"recovery_{uuid.uuid4().hex[:8]}", template=postgres_template)
    with start_tier(url, tier_redis.url, tmp_path_factory.mktemp("recovery-logs"), webs=1, workers=0,
                    COURSE_RUNNER_LEASE_S=LEASE_S) as running:
        yield running


def start_worker(tier, **env: str) -> subprocess.Popen:
    """Start one more `course worker` (env added to the tier's) and wait until it consumes."""
    plain = tier.env
    tier.env = {**plain, **env}
    try:
        return tier.start_worker()
    finally:
        tier.env = plain


def stop_worker(tier, proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc in tier.workers:
        tier.workers.remove(proc)


def query(tier, sql: str, **params) -> list[dict]:
    engine = create_engine(tier.env["COURSE_DATABASE_URL"])
    try:
        with engine.connect() as conn:
            return [dict(r) for r in conn.execute(text(sql), params).mappings()]
    finally:
        engine.dispose()


def stream_events(tier, job_id: str) -> list[dict]:
    return [json.loads(fields[b"e"]) for _, fields in tier.redis.xrange(f"course:events:{job_id}")]


def wait_for(check, what: str, bound: float = BOUND_S):
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what} within {bound} s")


def course(tier, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app.cli", *args], env={**tier.env, **env}, cwd=ROOT,
                          capture_output=True, text=True, timeout=BOUND_S)


@pytest.mark.skipif(FAKETIME_LIB is None, reason="needs libfaketime (Debian: apt-get install faketime)")
def test_a_worker_whose_clock_is_a_minute_behind_runs_each_job_once(tier):
    """Its heartbeats carry the database's time, so a sweeper with the right clock never finds them stale."""
    from tests.support.clients import Learner
    from tests.worker.test_tier_grading import run

    # a longer lease than the module's 3 s for this worker and its sweeper: a heartbeat every 3 s, stale after 9.
    # With 3 s a loaded host (load average 16 on 2 cores) once delayed the worker's heartbeat thread past its
    # lease, and the sweeper replaced a running job (attempt 2); a heartbeat on the worker's own clock would
    # still be 51 s past the lease, swept at the next of the job's nine sweeps
    lease = {"COURSE_RUNNER_LEASE_S": "9"}
    skewed = start_worker(tier, LD_PRELOAD=FAKETIME_LIB, FAKETIME="-60s", FAKETIME_DONT_FAKE_MONOTONIC="1", **lease)
    check = subprocess.run([sys.executable, "-c", "import time; print(time.time())"], capture_output=True, text=True,
                           env={**os.environ, "LD_PRELOAD": FAKETIME_LIB, "FAKETIME": "-60s"}, check=True)
    assert time.time() - float(check.stdout) > 55  # libfaketime does move a process's clock back
    sweeper = subprocess.Popen([sys.executable, "-m", "app.cli", "sweep", "--every", "1"], env={**tier.env, **lease},
                               cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        async def scenario():
            async with Learner(tier.web[0]) as learner:
                # each job runs 9 s, nine sweeps: long enough for a stale-looking heartbeat to be swept. One
                # after the other: this test is about running jobs, not jobs waiting their turn on the queue
                return [await learner.submit("same-device", slow_solution(9, 1.0)) for _ in range(2)]

        outcomes = run(scenario())
    finally:
        os.killpg(sweeper.pid, signal.SIGTERM)
        sweeper.wait(30)
        stop_worker(tier, skewed)
    for outcome in outcomes:
        assert outcome.verdict["status"] == "passed", outcome.verdict
        stored = query(tier, "SELECT status, attempt FROM submissions WHERE id = :id", id=outcome.submission_id)
        assert stored == [{"status": "passed", "attempt": 1}]
        starts = [e for e in stream_events(tier, outcome.submission_id) if e["kind"] == "start"]
        assert len(starts) == 1 and f":{skewed.pid}:" in starts[0]["data"]["worker"], starts


@pytest.fixture(scope="module")
def workers(tier):
    """Two plain workers for the tests after the clock's (which wants its skewed worker alone)."""
    started = [tier.spawn_worker(), tier.spawn_worker()]  # both at once: they warm up side by side
    for proc in started:
        tier.wait_worker(proc)
    yield started
    for proc in started:
        stop_worker(tier, proc)


def test_course_run_and_grade_on_the_tier_show_escapes_visibly_on_a_terminal(tier, workers, tmp_path):
    program = tmp_path / "attack.py"
    program.write_text(ATTACK, encoding="utf-8")
    env = {**tier.env, "TERM": "xterm-256color"}
    code, seen = run_on_pty([sys.executable, "-m", "app.cli", "run", str(program)], env, cwd=ROOT)
    text = assert_nothing_raw(seen)
    assert code == 1 and "ValueError: bad ^[[2J^[]0;exception title^G end" in text
    code, seen = run_on_pty([sys.executable, "-m", "app.cli", "grade", "same-device", str(program)], env, cwd=ROOT)
    text = assert_nothing_raw(seen)
    assert code == 1 and "same-device: failed on" in text and "FAIL runs" in text, text


def test_a_page_reading_through_a_redis_outage_mid_run_gets_every_line_then_the_verdict(tier, workers, tier_redis):
    """Redis stops for 5 s after the page has the first line; the run ends meanwhile and its verdict is stored.
    The page's stream goes on from the stored row, from exactly its position: every line once, then the verdict."""
    import asyncio

    from tests.helpers import parse_sse
    from tests.support.clients import Learner
    from tests.worker.test_tier_grading import run

    lines = 8
    code = (f"import sys, time\nfor i in range({lines}):\n    print('line', i, flush=True)\n    time.sleep(0.5)\n"
            "print('and a last word', file=sys.stderr)\n" + SOLUTION)

    async def scenario():
        async with Learner(tier.web[0]) as learner:
            response = await learner.request("POST", "/api/exercises/same-device/submissions", json={"code": code})
            assert response.status_code == 202, response.text
            submission_id = response.json()["id"]
            text, outage = "", None
            async with learner.client.stream("GET", f"/api/submissions/{submission_id}/events") as events:
                async for chunk in events.aiter_text():
                    text += chunk
                    if outage is None and "line 0" in text:
                        async def redis_away():
                            await asyncio.to_thread(tier_redis.stop)
                            await asyncio.sleep(5)
                            await asyncio.to_thread(tier_redis.start)

                        outage = asyncio.create_task(redis_away())
            await outage
            return submission_id, text

    submission_id, text = run(scenario())
    events = parse_sse(text)
    assert [kind for kind, _ in events][-1] == "verdict" and events[-1][1]["status"] == "passed", events[-1]
    verdict = events[-1][1]
    seen = {stream: [line["line"] for kind, data in events if kind == "output" for line in data["lines"]
                     if line["stream"] == stream] for stream in ("stdout", "stderr")}
    assert seen["stdout"][:lines] == [f"line {i}" for i in range(lines)], seen  # each once, in order
    assert seen["stdout"] == verdict["stdout"].splitlines() and seen["stderr"] == ["and a last word"], seen
    stored = query(tier, "SELECT status, attempt FROM submissions WHERE id = :id", id=submission_id)
    assert stored == [{"status": "passed", "attempt": 1}]


def test_a_regrade_whose_web_server_is_killed_is_taken_over_once_its_lease_ran_out(tier, workers):
    """SIGKILL `course serve` mid-regrade: the row stays running, but only for a lease. Then the dashboard's
    button takes it over and finishes it (same regrade, every submission graded once), and `course regrade` runs."""
    import asyncio

    from tests.support.clients import Learner
    from tests.worker.test_tier_grading import run

    slug, count = "same-device", 6
    created = course(tier, "users", "create", "ines@example.org", "--name", "Ines", "--instructor",
                     COURSE_NEW_USER_PASSWORD="a long password")
    assert created.returncode == 0, created.stderr

    async def submissions():
        async with Learner(tier.web[0]) as learner:
            return await asyncio.gather(*(learner.submit(slug, slow_solution(3, 0.4)) for _ in range(count)))

    assert all(o.verdict["status"] == "passed" for o in run(submissions()))
    count = query(tier, "SELECT count(*) AS n FROM submissions WHERE exercise_slug = :slug AND status IN "
                        "('passed', 'failed', 'timeout', 'error')", slug=slug)[0]["n"]  # earlier tests' too

    async def instructor(action):
        async with Learner(tier.web[0]) as ines:
            signed_in = await ines.request("POST", "/api/auth/login",
                                           json={"email": "ines@example.org", "password": "a long password"})
            assert signed_in.status_code == 200, signed_in.text
            ines.client.headers["X-CSRF-Token"] = signed_in.json()["csrf_token"]
            return await action(ines)

    async def start_regrade(ines):
        return await ines.request("POST", f"/api/instructor/exercises/{slug}/regrades", json={})

    first = run(instructor(start_regrade))
    assert first.status_code == 202, first.text
    regrade_id = first.json()["id"]
    regrade = f"SELECT status, done, total, holder FROM regrades WHERE id = {int(regrade_id)}"
    wait_for(lambda: query(tier, regrade)[0]["done"] >= 1, "the regrade graded a submission")
    url, web = tier.webs[0]
    os.killpg(web.pid, signal.SIGKILL)  # as a crash would: nothing marks the regrade interrupted
    web.wait()
    tier.webs.pop(0)
    tier.start_web(int(url.rsplit(":", 1)[1]))
    stalled = query(tier, regrade)[0]
    assert stalled["status"] == "running" and stalled["done"] < stalled["total"] == count, stalled

    def taken_over():
        again = run(instructor(start_regrade))
        assert again.status_code in (202, 409), again.text  # 409 while the dead server's lease lasts
        return again if again.status_code == 202 else None

    resumed = wait_for(taken_over, "the dashboard took the regrade over", bound=30)
    assert resumed.json()["id"] == regrade_id  # the same regrade, resumed, not a second one
    finished = wait_for(lambda: (r := query(tier, regrade)[0])["status"] != "running" and r, "the regrade finished")
    assert (finished["status"], finished["done"], finished["total"]) == ("finished", count, count), finished
    per_submission = query(tier, "SELECT submission_id, count(*) AS n FROM submission_verdicts WHERE regrade_id = "
                                 f"{int(regrade_id)} GROUP BY submission_id")
    assert len(per_submission) == count and all(r["n"] == 1 for r in per_submission), per_submission
    again = course(tier, "regrade", slug)
    assert again.returncode == 0 and f"regraded {count} submissions" in again.stdout, again.stderr


def test_a_course_run_whose_worker_dies_runs_again_within_the_lease_with_a_marker_line(tier, workers, tmp_path):
    """SIGKILL the worker running a plain `course run`: within a lease the CLI sends it again, prints the marker,
    then the whole rerun, and exits as the program does. Last in the module: it leaves one worker."""
    program = tmp_path / "lines.py"
    program.write_text("import time\nfor i in range(6):\n    print('line', i, flush=True)\n    time.sleep(0.5)\n")
    cli = subprocess.Popen([sys.executable, "-m", "app.cli", "run", str(program)], env=tier.env, cwd=ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        def running_on():
            keys = list(tier.redis.scan_iter(match="course:joblease:*"))
            holder = tier.redis.get(keys[0]) if keys else None
            return holder and next((p for p in tier.workers if f":{p.pid}:" in holder.decode()), None)

        victim = wait_for(running_on, "a worker took the job", bound=60)
        time.sleep(1)  # a line or two printed
        tier.kill_worker(victim)
        output, _ = cli.communicate(timeout=BOUND_S)
    finally:
        if cli.poll() is None:
            os.killpg(cli.pid, signal.SIGKILL)
    assert cli.returncode == 0, output
    lost, marker, rerun = output.partition("the worker stopped; running it again\n")
    assert marker, output
    assert rerun.splitlines() == [f"line {i}" for i in range(6)], output  # the whole rerun, after the marker
    assert lost.splitlines() and set(lost.splitlines()) <= {f"line {i}" for i in range(6)}, output
