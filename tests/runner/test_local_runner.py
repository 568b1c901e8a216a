"""The runner interface: streaming order, cancellation, the busy refusal, restart after the server dies."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from app.runner import BlockingRunner, Busy, DoneEvent, Job, OutputEvent
from app.sandbox.startup import STAGING_PREFIX


def test_output_streams_line_by_line_in_order(sandbox):
    code = ("import sys, time\nfor i in range(5):\n    print('out', i, flush=True)\n"
            "    print('err', i, file=sys.stderr, flush=True)\n    time.sleep(0.05)\nprint('no newline', end='')")
    events: list = []
    r = sandbox.run_code(code, events=events)
    assert r.status == "ok"
    lines = [(e.stream, e.line) for e in events]
    assert [text for s, text in lines if s == "stdout"] == [f"out {i}" for i in range(5)] + ["no newline"]
    assert [text for s, text in lines if s == "stderr"] == [f"err {i}" for i in range(5)]
    assert lines.index(("stdout", "out 0")) < lines.index(("stderr", "err 1"))  # interleaved as printed
    assert r.stdout.endswith("out 4\nno newline")


def test_events_arrive_while_the_job_runs_and_end_with_one_done(sandbox):
    async def main():
        code = "import time\nprint('a', flush=True)\ntime.sleep(0.5)\nprint('b')"
        handle = await sandbox.runner.submit(Job(code=code))
        seen = []
        async for event in handle.events():
            seen.append((time.monotonic(), event))
        return seen, await handle.result()

    seen, result = sandbox.call(main())
    kinds = [type(e) for _, e in seen]
    assert kinds == [OutputEvent, OutputEvent, DoneEvent] and seen[-1][1].result is result
    assert seen[1][0] - seen[0][0] > 0.3  # 'a' arrived before the sleep ended: streamed, not buffered


@pytest.fixture(scope="module")
def narrow(sandbox_settings):
    """A runner that runs one job at a time and queues one more."""
    settings = sandbox_settings.model_copy(update={"runner_concurrency": 1, "runner_queue_size": 1})
    with BlockingRunner(settings) as runner:
        yield runner


def test_busy_when_the_queue_is_full(narrow):
    runner = narrow.runner

    async def main():
        slow = Job(code="import time; time.sleep(0.5)")
        first = await runner.submit(slow)
        await asyncio.sleep(0.05)
        second = await runner.submit(slow)  # waits in the queue
        with pytest.raises(Busy) as busy:
            await runner.submit(slow)
        results = [await first.result(), await second.result()]
        third = await runner.submit(Job(code="print(3)"))  # room again
        return busy.value, results, await third.result()

    busy, results, third = narrow.call(main())
    assert busy.retry_after >= 1 and "retry in" in str(busy)
    assert [r.status for r in results] == ["ok", "ok"] and third.stdout == "3\n"


def test_cancel_running_and_queued_jobs(narrow):
    runner = narrow.runner

    async def main():
        running = await runner.submit(Job(code="import time\nprint('started', flush=True)\ntime.sleep(30)"))
        queued = await runner.submit(Job(code="print('never')"))
        async for _ in running.events():
            break  # the first line: it is running
        await queued.cancel()
        await running.cancel()
        return await running.result(), await queued.result()

    started = time.monotonic()
    running, queued = narrow.call(main())
    assert running.status == "cancelled" and running.stdout == "started\n"
    assert queued.status == "cancelled" and queued.stdout == ""
    assert time.monotonic() - started < 15


def test_server_restarts_after_being_killed_and_fails_in_flight_jobs(narrow):
    first_pid = narrow.runner.server_pid

    async def kill_during_job():
        handle = await narrow.runner.submit(Job(code="import time\nprint('up', flush=True)\ntime.sleep(30)"))
        async for _ in handle.events():
            os.kill(first_pid, signal.SIGKILL)
            break
        return await handle.result()

    in_flight = narrow.call(kill_during_job())
    assert in_flight.status == "error" and "stopped unexpectedly" in in_flight.message
    after = narrow.run_code("print('back')")
    assert after.status == "ok" and after.stdout == "back\n"
    assert narrow.runner.server_pid != first_pid and narrow.runner.restarts == 1


@pytest.mark.slow  # starts a fork server of its own
def test_a_stuck_server_is_replaced(narrow):
    runner, restarts = narrow.runner, narrow.runner.restarts
    runner.hang_grace_s = 1

    async def freeze_during_job():
        handle = await runner.submit(Job(code="import time\nprint('up', flush=True)\ntime.sleep(30)",
                                         limits=dataclasses.replace(runner.limits, wall_s=1)))
        async for _ in handle.events():
            os.kill(runner.server_pid, signal.SIGSTOP)  # a hung server: it never answers
            break
        return await handle.result()

    try:
        stuck = narrow.call(freeze_during_job())
    finally:
        runner.hang_grace_s = 30
    assert stuck.status == "error" and "stopped unexpectedly" in stuck.message
    assert narrow.run_code("print('fresh')").stdout == "fresh\n" and runner.restarts == restarts + 1


NO_ROOT_NO_USERNS = {"as_unprivileged": True, "no_userns": True}


def test_without_root_or_user_namespaces_the_sandbox_refuses_to_run_code(sandbox_settings):
    with BlockingRunner(sandbox_settings, server_options=NO_ROOT_NO_USERNS) as sbx:
        info = sbx.runner.info
        result = sbx.run_code("print('should not run')")
    assert info["refuse"] and not info["isolate"] and "COURSE_SANDBOX_UNSAFE_DEV" in info["refuse"]
    assert result.status == "error" and "needs root or user namespaces" in result.message and result.stdout == ""


@pytest.mark.slow  # starts a fork server of its own
def test_unsafe_dev_mode_runs_code_with_rlimits_and_seccomp_only(sandbox_settings):
    settings = sandbox_settings.model_copy(update={"sandbox_unsafe_dev": True})
    with BlockingRunner(settings, server_options=NO_ROOT_NO_USERNS) as sbx:
        info = sbx.runner.info
        ok = sbx.run_code("import socket\nprint('ran')\nsocket.socket(socket.AF_INET)")
        slow = sbx.run_code("import time\ntime.sleep(30)", wall_s=1)
    assert info["refuse"] is None and not info["isolate"] and info["layers"]["seccomp filter"]
    assert ok.stdout == "ran\n" and "PermissionError" in ok.stderr  # seccomp still on
    assert (slow.status, slow.limit_hit) == ("limit", "wall")


USERNS_PROBE = """
import os, socket
status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
print(os.getpid(), socket.gethostname(), status["CapEff"].strip(), status["CapBnd"].strip())
for path in ("/etc/passwd", "__ROOT__/pyproject.toml"):
    print(os.path.exists(path))
try:
    open("/usr/sbx_probe", "w")
except OSError as exc:
    print("denied", exc.errno)
socket.socket(socket.AF_INET)
"""


@pytest.mark.slow  # starts a fork server of its own
def test_without_root_a_user_namespace_isolates_the_job(sandbox_settings):
    """This host runs everything as root; the server is told to act as if it had no root (but user namespaces)."""
    from app import ROOT

    with BlockingRunner(sandbox_settings, server_options={"as_unprivileged": True}) as sbx:
        info = sbx.runner.info
        r = sbx.run_code(USERNS_PROBE.replace("__ROOT__", str(ROOT)))
        slow = sbx.run_code("import time\ntime.sleep(30)", wall_s=1)
        spin = sbx.run_code("while True: pass", cpu_s=1)  # no cgroup here: the rlimit, then the rusage, tell
    assert (spin.status, spin.limit_hit) == ("limit", "cpu") and "CPU time limit of 1 s" in spin.stderr
    assert info["refuse"] is None and info["mode"] == "user namespace (no root)"
    assert not info["layers"]["unprivileged uid per slot"] and not info["layers"]["cgroup memory"]
    first, passwd, source, denied = r.stdout.splitlines()
    assert first == "1 sandbox 0000000000000000 0000000000000000"  # pid 1, own uts ns, no capabilities at all
    assert (passwd, source, denied) == ("False", "False", "denied 30")  # minimal root, read-only (EROFS)
    assert "PermissionError" in r.stderr  # seccomp: no AF_INET
    assert (slow.status, slow.limit_hit) == ("limit", "wall")


def test_the_app_starts_and_stops_a_runner_in_its_lifespan(sandbox_settings):
    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.runner import LocalRunner

    app = create_app(sandbox_settings)
    with TestClient(app):
        runner = app.state.runner
        assert isinstance(runner, LocalRunner) and not runner.eager  # test mode: the server starts with a job
    assert runner._stopping


def test_a_killed_servers_staging_directory_is_removed_by_the_next_server(narrow):
    """The restarted server (test above's situation) finds the dead one's staging directory and removes it; a
    live server's directory, a non-empty one and one without a pid in its name stay."""
    tmp = tempfile.gettempdir()
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{dead.pid}-")
    live = tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{os.getpid()}-")
    busy = tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{dead.pid}-")
    Path(busy, "keep").write_text("not empty")
    old_style = tempfile.mkdtemp(prefix=STAGING_PREFIX)
    try:
        killed = narrow.runner.server_pid
        os.kill(killed, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while narrow.runner.server_pid in (killed, None) and time.monotonic() < deadline:
            time.sleep(0.05)  # the runner notices and starts a new server, which cleans up on start
        after = narrow.run_code("print('back')")
        assert after.status == "ok"
        assert not os.path.exists(stale)
        assert all(os.path.isdir(d) for d in (live, busy, old_style))
        servers = [n for n in os.listdir(tmp) if n.startswith(f"{STAGING_PREFIX}{narrow.runner.server_pid}-")]
        assert len(servers) == 1  # the new server's own
    finally:
        shutil.rmtree(busy, ignore_errors=True)
        for d in (stale, live, old_style):
            if os.path.isdir(d):
                os.rmdir(d)


def test_server_frames_are_dispatched_as_their_bytes_arrive_in_order_and_refused_past_the_cap():
    """The runner's end of the fork server's socket (ServerFrames) hands each frame over as its last byte comes,
    frames split across reads or sharing one in order, an attachment as bytes; a frame over MAX_FRAME ends it with
    the reader's ValueError and nothing after it is dispatched."""
    import socket

    from app.runner.local import ServerFrames
    from app.sandbox import protocol

    async def scenario() -> tuple[list[dict], BaseException | None]:
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        got: list[dict] = []
        reader = ServerFrames(got.append, limit=protocol.MAX_FRAME, loop=loop)
        transport, _ = await loop.create_unix_connection(
            lambda: asyncio.StreamReaderProtocol(reader, loop=loop), sock=ours)
        ended = asyncio.ensure_future(reader.read())
        first = protocol.encode({"op": "out", "n": 1})
        both = protocol.encode({"op": "out", "n": 2}) + protocol.encode({"op": "done", "n": 3}, b'{"report": 1}')
        for piece in (first[:3], first[3:], both):
            theirs.sendall(piece)
            await asyncio.sleep(0.01)
        for _ in range(500):  # the last read may come a little later on a loaded machine
            if len(got) == 3:
                break
            await asyncio.sleep(0.01)
        assert [m["n"] for m in got] == [1, 2, 3] and got[2][protocol.ATTACHMENT] == b'{"report": 1}'
        theirs.sendall(protocol.HEADER.pack(protocol.MAX_FRAME + 1) + protocol.encode({"op": "out", "n": 4}))
        try:
            await asyncio.wait_for(ended, 5)
            error = None
        except ValueError as exc:
            error = exc
        transport.close()
        theirs.close()
        return got, error

    got, error = asyncio.run(scenario())
    assert [m["n"] for m in got] == [1, 2, 3]
    assert error is not None and "exceeds" in str(error)
