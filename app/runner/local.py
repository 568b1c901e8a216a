"""LocalRunner: a bounded queue in front of an embedded fork server (app.sandbox.server)."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import socket
import subprocess
import sys
import time
from typing import AsyncIterator, Callable

from app import ROOT
from app.harness.contract import job_host
from app.runner.base import (
    Busy,
    DoneEvent,
    Event,
    Job,
    OutputEvent,
    Result,
    check_source,
    new_job_id,
)
from app.sandbox import gpus, jobstate, protocol
from app.sandbox.job_limits import Limits

log = logging.getLogger("course.runner")

# seconds; importing torch and the warm-up step take ~2 s on an idle machine, far longer on a loaded one
SERVER_START_TIMEOUT_S = 180
# seconds past a job's wall-clock limit after which the server is presumed stuck and replaced
SERVER_HANG_GRACE_S = 30
# seconds to wait for the server to exit after its socket is closed, before it is killed
SERVER_STOP_TIMEOUT_S = 10
# seconds a GPU job may wait in the server for its slot's child: the last job's release, then a new CUDA
# context with cuBLAS and cuDNN warmed up, on a busy host
GPU_PREPARE_GRACE_S = 120
# The fork server's whole environment: no secrets, nothing from the app's process. NVML-based CUDA checks keep
# torch from initialising CUDA in the parent of forked children.
SERVER_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "OMP_NUM_THREADS": "1",
    "PYTORCH_NVML_BASED_CUDA_CHECK": "1",
    "PYTHONNOUSERSITE": "1",
}


def finished(msg: dict, output: Callable[[str, str], None]) -> dict:
    """The result of a "done" frame, with the report its attachment holds: the server passes a job's report on
    unread, so its refusal as unreadable, a line on the job's stderr, is made here (jobstate.read_report)."""
    result, data = msg["result"], msg.get(protocol.ATTACHMENT)
    if not isinstance(data, bytes):
        return result
    report, refused = jobstate.read_report(data, asked=bool(msg.get("report_asked")))
    if refused:
        line = f"[sandbox] {jobstate.REPORT_REFUSED[refused]}"
        output("stderr", line)
        result["stderr"] = (result.get("stderr") or "") + line + "\n"
    return {**result, "report": report}


class ServerFrames(asyncio.StreamReader):
    """The runner's end of the fork server's socket: each frame is decoded and handed to `dispatch` as its bytes
    arrive (the transport's data_received), rather than kept in the stream's buffer for a task's read() to take a
    loop turn later: that hop (a future, a task step, two copies of the bytes) cost the event loop ~9 us of each
    frame, six frames per graded job. read() returns only at the end: b"" when the server closes its end, or
    raises the ValueError of a frame the reader refused (protocol.FrameReader), after which nothing is dispatched."""

    def __init__(self, dispatch: Callable[[dict], None], **kwargs) -> None:
        super().__init__(**kwargs)
        self.dispatch = dispatch
        self.frames = protocol.FrameReader()

    def feed_data(self, data: bytes) -> None:
        if self.exception() is not None:
            return
        try:
            messages = self.frames.feed(data)
        except ValueError as exc:
            self.set_exception(exc)
            return
        for msg in messages:
            self.dispatch(msg)


class LocalJobHandle:
    """A job submitted to a LocalRunner."""

    def __init__(self, runner: "LocalRunner", job: Job, limits: Limits) -> None:
        self.id = new_job_id()
        self.job = job
        self.limits = limits
        self.state = "queued"  # queued -> running -> done
        self._runner = runner
        self._events: asyncio.Queue[Event] = asyncio.Queue()
        self._done: asyncio.Future[Result] = asyncio.get_running_loop().create_future()

    async def events(self) -> AsyncIterator[Event]:
        """Yield OutputEvents as lines arrive, then exactly one DoneEvent."""
        while True:
            event = await self._events.get()
            yield event
            if isinstance(event, DoneEvent):
                return

    async def result(self) -> Result:
        """Wait for and return the result."""
        return await asyncio.shield(self._done)

    async def cancel(self) -> None:
        """Stop the job; a queued job never starts, a running one is killed."""
        await self._runner._cancel(self)

    def _output(self, stream: str, line: str) -> None:
        self._events.put_nowait(OutputEvent(stream, line))  # type: ignore[arg-type]

    def _finish(self, result: Result) -> None:
        if not self._done.done():
            self.state = "done"
            self._done.set_result(result)
            self._events.put_nowait(DoneEvent(result))


class LocalRunner:
    """Runs jobs on this machine: at most `runner_concurrency` at once, `runner_queue_size` waiting."""

    def __init__(self, settings, *, python: str | None = None, eager: bool | None = None,
                 server_options: dict | None = None) -> None:
        self.settings = settings
        self.server_options = server_options or {}  # extra fork-server config (tests: {"as_unprivileged": True})
        # tests start many apps and rarely run code: their fork server starts with the first job
        self.eager = settings.env != "test" if eager is None else eager
        self.limits = Limits.from_settings(settings)
        self.concurrency = max(1, settings.runner_concurrency)
        self.queue_size = max(0, settings.runner_queue_size)
        self.python = python or sys.executable
        self.info: dict = {}
        self.server_pid: int | None = None
        self.restarts = 0
        # the server has said it is ready and has not gone away since; a job that finds it not up waits for a
        # server to start (a cold start), which /readyz's warm-up exists to spare learners: cold_starts counts them
        self.up = False
        self.cold_starts = 0
        self._sem: asyncio.Semaphore | None = None
        self._waiting = 0
        self._running: dict[str, LocalJobHandle] = {}
        self._proc: asyncio.subprocess.Process | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task | None = None
        self._start_lock: asyncio.Lock | None = None
        self._tasks: set[asyncio.Task] = set()
        self._stopping = False
        self._avg_s = 1.0  # seconds per job, a moving average behind the busy refusal's retry hint
        self.hang_grace_s = SERVER_HANG_GRACE_S
        self.gpu_slots: list[gpus.GpuSlot] = []
        self._gpu_sem: asyncio.Semaphore | None = None

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Start the fork server in the background (the first job waits for it); lazily in test mode.

        Raises GpuConfigError at once (one line) when COURSE_GPU_DEVICES names GPUs this host does not have."""
        self.gpu_slots = gpus.resolve(self.settings.gpu_devices, str(self.settings.sandbox_gpu_dev_root))
        self._gpu_sem = asyncio.Semaphore(len(self.gpu_slots)) if self.gpu_slots else None
        self._sem = asyncio.Semaphore(self.concurrency)
        self._start_lock = asyncio.Lock()
        self._stopping = False
        if self.eager:
            task = asyncio.create_task(self._warm_start())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _warm_start(self) -> None:
        try:
            await self._ensure_server()
        except Exception:  # the first job retries and reports the failure
            log.exception("the sandbox server did not start")

    async def ready(self) -> dict:
        """Start the fork server if needed, wait until it is ready, and return what it reports about itself."""
        await self._ensure_server()
        return self.info

    async def stop(self) -> None:
        """Stop the fork server; queued and running jobs end with status 'error'."""
        self._stopping = True
        for task in list(self._tasks):
            task.cancel()
        await self._close_server()
        self._fail_running("the runner was stopped before the job finished")

    def _server_config(self) -> dict:
        s = self.settings
        return {"limits": self.limits.to_dict(), "prefork": s.sandbox_prefork, "uid_base": s.sandbox_uid_base,
                "unsafe_dev": s.sandbox_unsafe_dev, "pool": s.sandbox_pool,
                # a spawn pool's slots are never fewer than the jobs that run at once, so none waits on another
                "cpu_slots": max(s.sandbox_prefork, self.concurrency),
                "gpu_slots": [g.to_dict() for g in self.gpu_slots], "gpu_dev_root": str(s.sandbox_gpu_dev_root),
                "gpu_memory_bytes": s.sandbox_gpu_memory_bytes, "cpu_reserve": s.sandbox_cpu_reserve,
                "jobs_idle": s.sandbox_jobs_idle,
                # the host most jobs run on (an exercise without `machine:`): waiting children build it ahead
                "ahead_host": job_host(s).payload() if s.sandbox_prepare_ahead else None,
                # the exercises' probes, which the server compiles before its first fork (grade.keep_probes)
                "probes_dir": str(s.exercises_dir),
                **self.server_options}

    async def _ensure_server(self) -> None:
        async with self._start_lock:  # type: ignore[union-attr]
            if self._proc is not None and self._proc.returncode is None and self._writer is not None:
                return
            await self._spawn_server()

    async def _spawn_server(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._proc = await asyncio.create_subprocess_exec(
                self.python, "-m", "app.sandbox.server", json.dumps(self._server_config()), str(theirs.fileno()),
                pass_fds=(theirs.fileno(),), env=SERVER_ENV, cwd=str(ROOT),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True,
            )
        finally:
            theirs.close()
        self.server_pid = self._proc.pid
        loop = asyncio.get_running_loop()
        started: asyncio.Future[dict] = loop.create_future()

        def starting(msg: dict) -> None:  # until the server is ready, its ready frame is the only one read
            if msg.get("op") == "ready" and not started.done():
                started.set_result(msg)

        reader = ServerFrames(starting, limit=protocol.MAX_FRAME, loop=loop)
        transport, stream = await loop.create_unix_connection(
            lambda: asyncio.StreamReaderProtocol(reader, loop=loop), sock=ours)
        self._writer = asyncio.StreamWriter(transport, stream, reader, loop)
        ready = await asyncio.wait_for(self._read_until_ready(reader, started), SERVER_START_TIMEOUT_S)
        self.info = ready.get("info", {})
        if self.info.get("refuse"):
            log.error("sandbox refuses to run code: %s", self.info["refuse"])
        elif self.info.get("unsafe_dev") and not self.info.get("isolate"):
            log.warning("sandbox runs learner code WITHOUT isolation (COURSE_SANDBOX_UNSAFE_DEV)")
        reader.dispatch = self._dispatch
        self._reader_task = asyncio.create_task(self._read_loop(reader, self._proc))
        self.up = True

    async def _read_until_ready(self, reader: "ServerFrames", started: asyncio.Future) -> dict:
        ended = asyncio.ensure_future(reader.read())  # b"" once the server closes its end; its error if it breaks
        try:
            await asyncio.wait({started, ended}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ended.cancel()
        if started.done():
            if ended.done() and not ended.cancelled():
                ended.exception()  # the server went away just after: the read loop finds it so too
            return started.result()
        ended.result()  # a frame the reader refused (ValueError), as before
        code = await self._proc.wait()  # type: ignore[union-attr]
        raise RuntimeError(f"the sandbox server exited during start-up (exit code {code}); see its log")

    async def _read_loop(self, reader: "ServerFrames", proc) -> None:
        """Wait while the server's frames are dispatched as they come (ServerFrames); once it goes away, fail
        in-flight jobs and restart it."""
        try:
            await reader.read()  # b"": the server closed its end
        except (ConnectionError, ValueError) as exc:
            log.error("lost the sandbox server: %s", exc)
        if self._stopping or proc is not self._proc:
            return
        self.up = False
        code = await proc.wait()
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        self._fail_running(f"the sandbox server stopped unexpectedly (exit code {code}) while this job ran; "
                           "it has been restarted: run the code again")
        self.restarts += 1
        log.error("sandbox server %s died (exit code %s); restarting", proc.pid, code)
        try:
            await self._ensure_server()
        except Exception:  # the next job retries and reports
            log.exception("could not restart the sandbox server")

    def _dispatch(self, msg: dict) -> None:
        handle = self._running.get(msg.get("id", ""))
        if handle is None:
            return
        if msg["op"] == "out":
            for stream, line in msg["lines"]:
                handle._output(stream, line)
        elif msg["op"] == "done":
            self._running.pop(handle.id, None)
            handle._finish(Result.from_dict(finished(msg, handle._output)))

    def _fail_running(self, message: str) -> None:
        for handle in list(self._running.values()):
            handle._finish(Result(status="error", message=message))
        self._running.clear()

    async def _close_server(self) -> None:
        proc, writer = self._proc, self._writer
        self._writer = None
        self.up = False
        if writer is not None:
            writer.close()
        if proc is not None and proc.returncode is None and writer is None:
            proc.kill()  # still starting up (it only reads its socket once ready): nothing to wait for
        if proc is not None and proc.returncode is None:
            try:
                await asyncio.wait_for(proc.wait(), SERVER_STOP_TIMEOUT_S)
            except asyncio.TimeoutError:
                proc.kill()
                await proc.wait()
        if self._reader_task is not None:
            self._reader_task.cancel()

    # ------------------------------------------------------------------ jobs
    async def submit(self, job: Job) -> LocalJobHandle:
        """Queue a job; raise Busy when the queue is full, Rejected when the source is refused."""
        limits = job.limits or self.limits
        check_source(job, limits)
        if self._sem is None:
            raise RuntimeError("LocalRunner.start() was not awaited")
        if self._waiting >= self.queue_size + max(0, self.concurrency - len(self._running)):
            raise Busy(max(1, math.ceil(self._avg_s * (self._waiting + 1) / self.concurrency)))
        handle = LocalJobHandle(self, job, limits)
        self._waiting += 1
        task = asyncio.create_task(self._run(handle))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return handle

    async def _run(self, handle: LocalJobHandle) -> None:
        # a GPU job waits for a GPU slot, not for one of the CPU jobs' places
        sem = self._gpu_sem if handle.job.gpu and self._gpu_sem is not None else self._sem
        try:
            async with sem:  # type: ignore[union-attr]
                self._waiting -= 1
                if handle.state != "queued":  # cancelled while waiting
                    return
                await self._execute(handle)
        except asyncio.CancelledError:
            handle._finish(Result(status="error", message="the runner was stopped before the job finished"))
            raise
        except Exception as exc:  # a broken sandbox is the job's error, said plainly
            log.exception("job %s failed in the runner", handle.id)
            handle._finish(Result(status="error", message=f"the sandbox failed: {exc}"))

    async def _execute(self, handle: LocalJobHandle) -> None:
        started = time.monotonic()
        if not self.up:
            self.cold_starts += 1
        await self._ensure_server()
        if self.info.get("refuse"):
            handle._finish(Result(status="error", message=self.info["refuse"]))
            return
        handle.state = "running"
        self._running[handle.id] = handle
        limits = None if handle.limits == self.limits else handle.limits.to_dict()
        gpu = handle.job.gpu and bool(self.gpu_slots)
        self._writer.write(protocol.encode(  # type: ignore[union-attr]
            {"op": "run", "id": handle.id, "payload": handle.job.payload(), "limits": limits, "gpu": gpu,
             "key": handle.job.key}))
        await self._writer.drain()  # type: ignore[union-attr]
        grace = self.hang_grace_s + (GPU_PREPARE_GRACE_S if gpu else 0)
        try:
            await asyncio.wait_for(handle.result(), handle.limits.wall_s + grace)
        except asyncio.TimeoutError:  # the server enforces the wall clock; if it did not answer, it is stuck
            log.error("sandbox server %s did not finish job %s in time; restarting it", self.server_pid, handle.id)
            if self._proc is not None and self._proc.returncode is None:
                self._proc.kill()  # the read loop fails the jobs in flight and starts a new server
            await handle.result()
        self._avg_s = 0.8 * self._avg_s + 0.2 * (time.monotonic() - started)

    async def _cancel(self, handle: LocalJobHandle) -> None:
        if handle.state == "queued":
            handle._finish(Result(status="cancelled", message="cancelled before it started"))
        elif handle.state == "running" and self._writer is not None:
            self._writer.write(protocol.encode({"op": "cancel", "id": handle.id}))
            await self._writer.drain()


__all__ = ["LocalRunner", "LocalJobHandle", "ServerFrames"]
