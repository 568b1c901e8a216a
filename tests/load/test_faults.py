"""Faults, short version: kill a sandbox job, the fork server, then the whole web server, against the real site.

Real uvicorn (production mode), real SQLite file, real sandbox; traffic only to 127.0.0.1; every loop bounded in
count and time. Processes are found as descendants of the server process: sandbox job processes run with a uid at
or above settings.sandbox_uid_base. The only time bounds asserted are generous "ended within its limit" ones.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import time

import psutil
import pytest

from app import ROOT
from app.core.config import Settings
from tests.support.clients import Learner, solutions
from tests.support.servers import site_server

pytestmark = pytest.mark.slow

UID_BASE = Settings.model_fields["sandbox_uid_base"].default
WALL_S = Settings.model_fields["sandbox_wall_s"].default
# seconds a sandbox process may outlive the web server (the fork server sees its socket close, kills its children
# and cleans up; its own shutdown waits at most 5 s)
SURVIVAL_LIMIT_S = 15.0
# seconds the faulty job sleeps: long enough to be killed mid-run, well under the wall-clock limit
SLEEP_S = 5
# a job that names itself (PR_SET_NAME) so the test can tell it from the idle pre-forked children, then sleeps
SLEEPER = (f'import ctypes, time\nctypes.CDLL(None).prctl(15, b"faultjob", 0, 0, 0)\n'
           f'print("started", flush=True)\ntime.sleep({SLEEP_S})\n')
ENV = {"COURSE_SUBMISSION_RATE_LIMIT": "10000/minute", "COURSE_SUBMISSION_ADDRESS_RATE_LIMIT": "10000/minute",
       "COURSE_COMMENT_RATE_LIMIT": "10000/minute", "COURSE_COMMENT_ADDRESS_RATE_LIMIT": "10000/minute",
       "COURSE_SIGNUP_RATE_LIMIT": "1000/minute"}
FINAL = {"passed", "failed", "error", "timeout", "rejected"}


def sandbox_processes(server: psutil.Process) -> list[psutil.Process]:
    """Return the server's descendants that run as a sandbox uid (job processes and idle pre-forked children)."""
    found = []
    for proc in server.children(recursive=True):
        try:
            if proc.uids().real >= UID_BASE:
                found.append(proc)
        except psutil.NoSuchProcess:
            pass
    return found


def fork_server(server: psutil.Process) -> psutil.Process:
    """Return the web server's fork server child (python -m app.sandbox.server)."""
    for proc in server.children():
        try:
            if "app.sandbox.server" in proc.cmdline():
                return proc
        except psutil.NoSuchProcess:
            pass
    raise AssertionError("the web server has no fork server child")


def gone(proc: psutil.Process) -> bool:
    """True once a process has exited (a zombie nobody reaps counts as exited)."""
    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_gone(procs: list[psutil.Process], limit_s: float) -> list[psutil.Process]:
    """Wait up to limit_s for every process to exit; return those still alive."""
    deadline = time.monotonic() + limit_s
    alive = list(procs)
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if not gone(p)]
        time.sleep(0.1)
    return alive


async def submit_and_watch(learner: Learner, code: str, on_first_output=None) -> dict:
    """Submit to same-device; call on_first_output() when the first output line arrives; return the verdict."""
    response = await learner.request("POST", "/api/exercises/same-device/submissions", json={"code": code})
    assert response.status_code == 202, response.text
    event, seen_output = None, False
    async with learner.client.stream("GET", f"/api/submissions/{response.json()['id']}/events") as stream:
        async for line in stream.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "output" and not seen_output:
                seen_output = True
                if on_first_output is not None:
                    on_first_output()
            elif line.startswith("data: ") and event == "verdict":
                return json.loads(line[6:])
    raise AssertionError("the event stream ended without a verdict")


def name_of(proc: psutil.Process) -> str | None:
    """The process's name; None for one reaped since it was listed: the sandbox's processes come and go while the
    job starts (a waiting child's spare is killed and reaped as its job begins, harness drop_spare), and psutil
    reads /proc/<pid>/stat again for name(), as sandbox_processes does for uids()."""
    try:
        return proc.name()
    except psutil.NoSuchProcess:
        return None


def kill_job(server: psutil.Process) -> None:
    """SIGKILL the job process that named itself "faultjob"."""
    for attempt in range(50):  # the name is set a moment before the first line is printed; 5 s at most
        jobs = [p for p in sandbox_processes(server) if name_of(p) == "faultjob"]
        if jobs:
            for job in jobs:
                job.send_signal(signal.SIGKILL)
            return
        time.sleep(0.1)
    raise AssertionError("no sandbox process named faultjob")


def test_a_killed_job_and_a_killed_fork_server_end_in_error_and_the_next_job_passes(tmp_path):
    code = SLEEPER + solutions()["same-device"]
    good = solutions()["same-device"]

    async def scenario(base: str, server: psutil.Process) -> dict:
        async with Learner(base) as learner:
            started = time.monotonic()
            child_killed = await submit_and_watch(learner, code, lambda: kill_job(server))
            child_seconds = time.monotonic() - started
            after_child = await submit_and_watch(learner, good)
            old = fork_server(server)
            started = time.monotonic()
            server_killed = await submit_and_watch(learner, code, lambda: old.send_signal(signal.SIGKILL))
            server_seconds = time.monotonic() - started
            after_server = await submit_and_watch(learner, good)
            return {"child": child_killed, "child_s": child_seconds, "after_child": after_child,
                    "server": server_killed, "server_s": server_seconds, "after_server": after_server,
                    "old_pid": old.pid, "new_pid": fork_server(server).pid}

    with site_server(tmp_path, **ENV) as (base, proc):
        got = asyncio.run(scenario(base, psutil.Process(proc.pid)))
    print(f"\nfaults: killed job ended {got['child']['status']} in {got['child_s']:.1f} s, "
          f"killed fork server ended {got['server']['status']} in {got['server_s']:.1f} s")
    for key in ("child", "server"):
        verdict = got[key]
        assert verdict["status"] == "error", verdict  # not the learner's fault
        assert verdict["stderr"].strip(), verdict  # a message saying what happened
        assert got[f"{key}_s"] < SLEEP_S + WALL_S, "the killed job must end at once, not at its own pace"
    assert "killed from outside" in got["child"]["stderr"]
    assert "restarted" in got["server"]["stderr"]
    assert got["after_child"]["status"] == "passed", got["after_child"]
    assert got["after_server"]["status"] == "passed", got["after_server"]
    assert got["new_pid"] != got["old_pid"]


def test_only_a_sigkill_without_a_limit_or_report_is_the_sites_error():
    from app.content.exercises import load_exercises
    from app.grading.grader import evaluate
    from app.runner.base import Result

    exercise = load_exercises(ROOT / "exercises")["same-device"]
    killed = Result(status="failed", signal=signal.SIGKILL, message="killed by signal SIGKILL")
    exited = Result(status="ok", exit_code=0, message="exited normally")  # os._exit(0) before the work
    over_cpu = Result(status="limit", signal=signal.SIGKILL, limit_hit="cpu", message="CPU time limit")
    assert evaluate(exercise, killed, "nonce").status == "error"
    assert evaluate(exercise, exited, "nonce").status == "failed"
    assert evaluate(exercise, over_cpu, "nonce").status == "timeout"


# --- the whole web server dies ---------------------------------------------------------------------------


async def commenter(base: str, n: int, stop: asyncio.Event, acked: list) -> None:
    """Sign up, then post comments until stop (at most 40); record each comment the server acknowledged."""
    async with Learner(base, timeout=10) as learner:
        response = await learner.request("POST", "/api/auth/signup", json={
            "display_name": f"Faulty {n}", "email": f"faulty{n}@example.org", "password": "correct horse 1"})
        assert response.status_code == 201, response.text
        learner.client.headers["X-CSRF-Token"] = response.json()["csrf_token"]
        for i in range(40):
            if stop.is_set():
                return
            body = f"comment {i} from writer {n}"
            response = await learner.request("POST", "/api/lessons/cpu-gpu-border/comments", json={"body": body})
            if response.status_code == 201:
                acked.append((response.json()["id"], body))


async def submitter(base: str, code: str, stop: asyncio.Event, acked: list, cookies: list) -> None:
    """Submit code until stop (at most 6 times) without waiting for verdicts; record each accepted submission."""
    async with Learner(base, timeout=10) as learner:
        for _ in range(6):
            if stop.is_set():
                return
            response = await learner.request("POST", "/api/exercises/same-device/submissions", json={"code": code})
            if response.status_code == 202:
                acked.append(response.json()["id"])
                cookies.append((response.json()["id"], learner.cookie))
            await asyncio.sleep(0.2)


async def traffic_until_killed(base: str, server: psutil.Process, code: str) -> dict:
    """Post comments and submissions; once enough were acknowledged, SIGKILL the server's process group."""
    async with Learner(base) as learner:  # the sandbox is warm: some runs are running, not only queued, at the kill
        await submit_and_watch(learner, solutions()["same-device"])
    stop = asyncio.Event()
    comments: list = []
    submissions: list = []
    cookies: list = []
    tasks = [asyncio.create_task(commenter(base, n, stop, comments)) for n in range(3)]
    tasks += [asyncio.create_task(submitter(base, code, stop, submissions, cookies)) for _ in range(4)]
    deadline = time.monotonic() + 30
    while (len(comments) < 10 or len(submissions) < 6) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    sandbox = sandbox_processes(server) + [fork_server(server)]
    os.killpg(server.pid, signal.SIGKILL)  # the uvicorn process and everything in its session
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)  # requests in flight fail: they were never acknowledged
    return {"comments": comments, "submissions": submissions, "cookies": cookies, "sandbox": sandbox}


def test_sigkill_of_the_web_server_loses_nothing_acknowledged_and_unfinished_runs_become_errors(tmp_path):
    env = {**ENV, "COURSE_SECRET_KEY": "fault-test-" + "k" * 40, "COURSE_RUNNER_CONCURRENCY": "1"}
    # a run long enough that most submissions are still queued or running when the server dies
    code = "import time\ntime.sleep(1)\n" + solutions()["same-device"]
    with site_server(tmp_path, **env) as (base, proc):
        server = psutil.Process(proc.pid)
        got = asyncio.run(traffic_until_killed(base, server, code))
        proc.wait(timeout=10)
    alive = wait_gone(got["sandbox"], SURVIVAL_LIMIT_S)
    assert not alive, f"sandbox processes outlived the web server: {[p.pid for p in alive]}"
    assert len(got["comments"]) >= 10 and len(got["submissions"]) >= 6, "not enough traffic before the kill"

    with site_server(tmp_path, **env) as (base, proc):  # same workdir: the same database file, migrated again
        db = sqlite3.connect(tmp_path / "course.db")
        try:
            assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            stored_comments = dict(db.execute("SELECT id, body FROM comments").fetchall())
            rows = {row[0]: row[1:] for row in db.execute("SELECT id, code, status, verdict FROM submissions")}
        finally:
            db.close()
        after = asyncio.run(_status_and_a_new_run(base, got["cookies"][0]))

    for comment_id, body in got["comments"]:
        assert stored_comments.get(comment_id) == body, f"acknowledged comment {comment_id} is not stored"
    for submission_id in got["submissions"]:
        assert submission_id in rows, f"acknowledged submission {submission_id} is not stored"
        assert rows[submission_id][0] == code, f"submission {submission_id} lost its code"
    assert all(code_ for code_, _s, _v in rows.values()), "a submission row without code"
    statuses = [status for _c, status, _v in rows.values()]
    assert set(statuses) <= FINAL, f"unfinished submissions were left behind: {statuses}"
    interrupted = [json.loads(v) for _c, status, v in rows.values() if status == "error"]
    assert interrupted, "with one job at a time, some submissions were still queued when the server died"
    assert all("restarted" in v["stderr"] for v in interrupted), interrupted
    print(f"\nfaults: {len(got['comments'])} comments and {len(got['submissions'])} submissions acknowledged "
          f"before SIGKILL; {len(interrupted)} unfinished runs marked error on restart")
    assert after["old"]["status"] in FINAL
    assert after["new"]["status"] == "passed", after["new"]


async def _status_and_a_new_run(base: str, first: tuple[str, str]) -> dict:
    submission_id, cookie = first
    async with Learner(base) as learner:
        learner.client.headers["Cookie"] = cookie  # the same secret key: the old session is still valid
        csrf = await learner.request("GET", "/api/auth/csrf")
        learner.client.headers["X-CSRF-Token"] = csrf.json()["csrf_token"]
        response = await learner.request("GET", f"/api/submissions/{submission_id}")
        assert response.status_code == 200, response.text
        new = await submit_and_watch(learner, solutions()["same-device"])
    return {"old": response.json(), "new": new}
