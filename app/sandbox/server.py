"""The fork server: imports torch once, then has one isolated child forked per job, and supervises them.

Started by the runner as `python -m app.sandbox.server CONFIG_JSON CONTROL_FD` with a clean environment, so it
holds no secrets and no database handle. It holds the jobs' output, payloads, keys and reports, so it forks no
job itself: right after preparing, before its first job, it forks the zygote (zygote.py), which forks every
child from a heap that never held any job's data. Children are re-parented to this process (the subreaper),
which reaps them, reads their pipes and enforces their limits. It talks to the runner over one Unix socket
(framed JSON, see protocol.py):

    runner -> server   {"op": "run", "id", "payload", "limits", "gpu", "key"}   {"op": "cancel", "id"}
    server -> runner   {"op": "ready", "info"}   {"op": "out", "id", "lines": [[stream, line], ...]}
                       {"op": "done", "id", "result", "report_asked"} + the job's report, unread (an attachment)

The server is single-threaded (one selector loop), and so is the zygote: a child forked while another thread
holds a lock (or after an OpenMP region) can hang. Everything read from a job (status, report, output) is
bounded and validated; an exception while handling one job ends that job with an error and nothing else.
"""

from __future__ import annotations

import json
import os
import resource
import selectors
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections import deque

from app.sandbox import child as childmod
from app.sandbox import gpus, isolation, jobstate, pools, protocol, startup
from app.sandbox.cgroups import NORMAL_HOLD_S, CgroupManager
from app.sandbox.job_limits import Limits
from app.sandbox.jobqueue import JobQueue
from app.sandbox.jobstate import RunningJob, limit_message
from app.sandbox.startup import log
from app.sandbox.zygote import Zygote

# seconds between CPU-time checks of running jobs (the cgroup counts every thread and process of a job)
CPU_POLL_S = 0.1
# bytes read from a child's pipe at once
READ_CHUNK = 1 << 16
# bytes kept of what a child printed before it was given a job (a setup failure's words)
SETUP_OUT_MAX = 64 << 10
# seconds between two tries at removing a finished job's cgroups while the server has work (see retire)
RETIRE_POLL_S = 0.005
# finished children's cgroups kept for a quiet moment at most; past this many they are removed at once
RETIRE_BACKLOG = 4
# seconds after which a finished job's cgroups that still hold processes are logged (once), and then tried only
# every RETIRE_SLOW_S: a process stuck in the kernel must not keep the server waking 200 times a second
RETIRE_WARN_S = 5.0
RETIRE_SLOW_S = 1.0
# seconds; the least time between two notes in the log that jobs starved for a core (CgroupManager.feed_jobs): a host
# that stays busy would otherwise log every NORMAL_HOLD_S
STARVED_NOTE_S = 60.0
# a job whose bytes could not be read or passed on (see _fail_job): the job alone ends with this
UNREADABLE = ("the grader could not read this run's report; this is not your code's fault if it ran normally: "
              "run it again")


class ForkServer(JobQueue):
    """The server's state: prepared context, pool of waiting children, running jobs."""

    def __init__(self, config: dict, sock) -> None:
        self.config = config
        self.sock = sock
        self.defaults = Limits.from_dict(config["limits"])
        self.prefork = int(config.get("prefork", 0))
        self.sel = selectors.DefaultSelector()
        self.cpu_pool = self.gpu_pool = None
        self.gpu_refuse: str | None = None  # why GPU slots were asked for but cannot be used
        self.waiting: deque = deque()  # (job id, payload, limits, pool): jobs waiting for a ready child
        self.children: dict[int, object] = {}  # the zygote's child's pid -> ChildProcess
        self.starting: deque = deque()  # ChildProcesses asked of the zygote whose pid has not come yet, in order
        # finished children's cgroups still to remove, with their uid slot and when they finished (see retire)
        self.retiring: list[tuple[object, int, float]] = []
        self.jobs: dict[str, RunningJob] = {}
        self.ended: deque = deque(maxlen=64)  # when the latest jobs ended (monotonic s; forget_job, refill_pools)
        self.uid_slots: set[int] = set()
        self.refuse: str | None = None
        self.info: dict = {}
        self.closing = False
        self.zygote: Zygote | None = None
        self.zygote_gone = False  # its socket closed: no pid or fate will come any more
        self._wake_r = self._wake_w = -1
        self.starved_noted_at = -STARVED_NOTE_S  # monotonic s of the last note that jobs starved (see _note_starved)
        self.starved_since_note = 0

    # ------------------------------------------------------------------ preparation
    def prepare(self) -> None:
        """Warm up torch, import the harness, plan the root, build seccomp and cgroups, and self-test."""
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        isolation.prctl(isolation.PR_SET_CHILD_SUBREAPER, 1)  # orphans of jobs come back to us to be reaped
        started = time.monotonic()
        info = startup.warm_up(gpu=bool(self.config.get("gpu_slots")))
        import app.harness as harness  # before forking: children cannot read project files

        harness.load()
        if self.config.get("probes_dir"):  # the course's probes, compiled once here, not in each graded job
            from app.harness import grade

            grade.keep_probes(self.config["probes_dir"])
        from app.harness.tracing.placement import measure_dispatch

        info["dispatch_us"] = round(measure_dispatch() * 1e6, 2)  # once here, not in each job (clock.DISPATCH_S)

        startup.freeze_heap()
        info["huge_pages_mb"] = startup.huge_pages() >> 20  # after the warm-up, before any fork: see huge_pages

        # "as_unprivileged" makes a root server behave like one without root, "no_userns" like one without user
        # namespaces: how the tests reach those modes on a machine where everything runs as root
        root = os.getuid() == 0 and not self.config.get("as_unprivileged")
        userns = not root and not self.config.get("no_userns") and isolation.userns_available()
        unsafe = bool(self.config.get("unsafe_dev"))
        seccomp_ok, seccomp_why = isolation.seccomp_available()
        self.cgroups = CgroupManager(float(self.config.get("cpu_reserve") or 0),
                                     bool(self.config.get("jobs_idle"))) if root else None
        startup.remove_stale_staging(tempfile.gettempdir())
        self.staging = tempfile.mkdtemp(prefix=f"{startup.STAGING_PREFIX}{os.getpid()}-")
        os.chmod(self.staging, 0o755)
        plan = isolation.plan_root()
        gpu_slots = [gpus.GpuSlot.from_dict(g) for g in self.config.get("gpu_slots", [])]
        self.ctx = childmod.Context(
            isolate=root or userns, userns=userns, plan=plan, staging=self.staging,
            uid_base=int(self.config.get("uid_base", 64000)),
            seccomp=isolation.seccomp_filter() if seccomp_ok else None,
            seccomp_every_thread=isolation.seccomp_filter(every_thread=True) if seccomp_ok else None,
            seccomp_net=isolation.seccomp_filter(network=True) if seccomp_ok else None,
            seccomp_net_every_thread=isolation.seccomp_filter(every_thread=True, network=True) if seccomp_ok else None,
            gpu_plan=isolation.with_files(plan, gpus.driver_libraries()) if gpu_slots else None,
            harness=harness, pids_cgroup=bool(self.cgroups and "pids" in self.cgroups.controllers),
            sources=startup.project_sources(childmod.APP_DIR),
        )
        # now, before any job: the zygote's heap is this process's as it is here, holding no job's data
        self.zygote = Zygote.start(self.ctx)
        if not root and not userns and not unsafe:
            self.refuse = startup.NEEDS_ROOT
        self.base_devices = [gpus.device_numbers(f"/dev/{d}") for d in isolation.DEVICES]
        self.cpu_pool, self.gpu_pool, self.gpu_refuse = pools.make_pools(self, gpu_slots, root)
        info.update(self._describe(seccomp_why))
        info["warmup_s"] = round(time.monotonic() - started, 3)
        if self.refuse is None:
            self._self_test(info, unsafe)
        self.info = info

    def _describe(self, seccomp_why: str) -> dict:
        info = startup.describe(self.ctx, self.cgroups, self.config, self.defaults, self.prefork, self.refuse,
                                seccomp_why)
        info["pool"] = self.cpu_pool.describe()
        info["gpu_pool"] = self.gpu_pool.describe() if self.gpu_pool else None
        info["gpu_refuse"] = self.gpu_refuse
        return info

    def _self_test(self, info: dict, unsafe: bool) -> None:
        """Run one empty job; if isolation fails on this host, refuse (or, in unsafe mode, run without it)."""
        result = self.run_blocking({"code": "pass", "filename": "selftest.py", "mode": "run", "grade": None})
        info["self_test"] = result["status"]
        if result["status"] == "ok":
            return
        why = (result["stderr"].strip() or result["message"])[-500:]
        if unsafe and self.ctx.isolate:
            log(f"isolation failed ({why}); UNSAFE development mode: running code without isolation")
            self.ctx.isolate = self.ctx.userns = False
            info.update(self._describe(info.get("seccomp_note", "")))
            info["self_test"] = self.run_blocking({"code": "pass", "filename": "t.py", "mode": "run",
                                                   "grade": None})["status"]
        else:
            self.refuse = f"the sandbox could not isolate a job on this host: {why}"
            info["refuse"] = self.refuse

    def run_blocking(self, payload: dict) -> dict:
        """Run one job to completion inside the server (used for the start-up self-test)."""
        results: list[dict] = []
        send = self.send
        self.send = lambda msg, *_: results.append(msg) if msg.get("op") == "done" else None  # type: ignore[method-assign]
        try:
            self.start_job("selftest", payload, self.defaults)
            while not results:
                self.step()
        finally:
            self.send = send  # type: ignore[method-assign]
        return results[0]["result"]

    def kill(self, job: RunningJob, limit: str | None = None, cancelled: bool = False) -> None:
        """Stop a job now: SIGKILL its processes; the result is sent once they are reaped."""
        if job.status is not None:
            return
        if limit and job.limit_hit is None:
            job.limit_hit = limit
            if limit in ("wall", "cpu", "output"):
                job.note(limit_message(limit, job.limits, job.modeled_clock))
        job.cancelled = job.cancelled or cancelled
        job.killed = True
        self._kill_proc(job.child)

    def _kill_proc(self, proc) -> None:
        try:
            if proc.pid is None:  # not forked yet: killed as soon as its pid comes (_forked)
                proc.kill_asked = True
            elif self.ctx.isolate:
                os.kill(proc.pid, signal.SIGKILL)  # the job process is killed with its pid namespace
            else:
                os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if proc.cgroup is not None:
            proc.cgroup.signal_all()  # no waiting here: finish() sweeps once the child is reaped

    # ------------------------------------------------------------------ events
    def send(self, message: dict, attachment: bytes | None = None) -> None:
        """Send one frame to the runner (blocking: the runner always reads), with attachment's bytes after its JSON; a
        result too large for one frame is cut to fit (_within_frame) and goes without them, so no job can make a frame
        the runner refuses."""
        frame = protocol.encode(message, attachment)
        if protocol.frame_size(frame) > protocol.MAX_FRAME and message.get("op") == "done":
            frame = protocol.encode({**message, "result": _within_frame(message["result"])})
        self.sock.sendall(frame)

    def on_pipe(self, kind: str, proc) -> bool:
        """Read what a child wrote on stdout, stderr or the report pipe; return False when nothing was there."""
        fd = getattr(proc, kind)
        try:
            data = os.read(fd, READ_CHUNK)
        except BlockingIOError:
            return False
        if not data:
            self.sel.unregister(fd)
            return False
        if kind == "report" and not proc.ready:
            proc.ready, data = True, data[1:]
        job = proc.job
        if job is None:
            if kind != "status":
                proc.setup_out += data[: max(0, SETUP_OUT_MAX - len(proc.setup_out))]
            return True
        try:
            self._on_job_bytes(kind, proc, job, data)
        except Exception as exc:  # noqa: BLE001 - one job's bytes end that job, never the server
            self._fail_job(proc, job, exc)
        return True

    def _on_job_bytes(self, kind: str, proc, job: RunningJob, data: bytes) -> None:
        if kind == "status":
            for token in job.on_status(data) if job.status is None else ():
                if token == b"K":
                    self._give_key(proc, job)
                elif jobstate.EXIT_CODE.fullmatch(token) and int(token) <= 255:
                    self.complete(proc, int(token) << 8)
                    # the job is over: nothing of it may run on (daemons, children); reaping follows when the
                    # processes have finished exiting, without delaying the result
                    if proc.cgroup is not None:
                        proc.cgroup.signal_all()
                    else:
                        self._kill_proc(proc)
                    return
        elif kind == "report":
            job.on_report(data)
        elif not job.on_output(kind, data):
            self.kill(job, "output")

    def _give_key(self, proc, job: RunningJob) -> None:
        """Answer the job's key request on its payload pipe: the first one with the key, every later one never."""
        answer = job.take_key()
        if proc.payload is None:
            return
        try:
            if answer is not None:
                os.write(proc.payload, answer)
        except OSError:
            pass
        finally:
            os.close(proc.payload)
            proc.payload = None

    def _fail_job(self, proc, job: RunningJob, exc: Exception) -> None:
        """Handling this job's bytes raised: stop it and send it an error result; the server goes on."""
        log(f"job {job.id}: {type(exc).__name__} while reading what it wrote: {exc}")
        if job.status is None:
            job.status = 0
        self._kill_proc(proc)
        if self.forget_job(job.id):  # its result was not sent yet
            self.send({"op": "done", "id": job.id, "result": startup.refused_result(UNREADABLE)})

    def drain(self, proc) -> None:
        """Read everything left in a dead child's pipes (stop early if a straggler still holds one open)."""
        for kind in ("stdout", "stderr", "report"):
            while getattr(proc, kind) in self.sel.get_map() and self.on_pipe(kind, proc):
                pass

    def reap(self) -> None:
        """Finish the jobs whose child exited (the zygote reaps those and says how each ended); reap our
        own children (the zygote; orphans that reach us, the subreaper)."""
        while True:
            try:
                pid, status, _usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if self.zygote is not None and pid == self.zygote.pid:
                log(f"the zygote exited (status {status}); stopping, so that the runner starts a fresh server")
                self.closing = True
        if self.zygote is None:
            return
        if not self.zygote.collect():
            self.zygote_gone = True
        if self.zygote_gone and not self.closing:
            log("the zygote closed its socket; stopping, so that the runner starts a fresh server")
            self.closing = True
        forked, self.zygote.forked = self.zygote.forked, []
        for pid, error in forked:  # before the fates: a child's pid comes before its exit
            self._forked(self.starting.popleft(), pid, error)
        exits, self.zygote.exits = self.zygote.exits, []
        for pid, status, cpu_s in exits:
            proc = self.children.pop(pid, None)
            if proc is not None:
                proc.cpu_s = cpu_s  # all of the job's processes: its pid 1 (or outer child) reaped them
                self.finish(proc, status)

    def _forked(self, proc, pid: int | None, error: str | None) -> None:
        """The zygote answered a request (spawn_child): the child's pid, or why it could not fork it."""
        if pid is None:
            log(f"the zygote could not fork a child: {error}")
            proc.setup_out += f"the sandbox's zygote could not fork a child: {error}\n".encode()
            self.finish(proc, childmod.SETUP_FAILED << 8)
            return
        proc.pid = pid
        self.children[pid] = proc
        if proc.kill_asked or self.closing:
            self._kill_proc(proc)

    def finish(self, proc, status: int) -> None:
        """The child exited: kill stragglers, send the result if not sent yet, clean up (its cgroups and uid
        slot once its processes are gone: retire)."""
        if proc.cgroup is not None:
            proc.cgroup.signal_all()
        if proc.job is None and not self.closing:  # a waiting child died before getting work
            log(f"pre-forked child {proc.pid} exited early (status {status}): {self.setup_text(proc)[-300:]}")
        elif proc.job is not None and proc.job.status is None:
            self.complete(proc, status)
        if not self.closing:
            for pool in (self.cpu_pool, self.gpu_pool):
                if pool is not None:
                    pool.exited(proc, had_job=proc.job is not None)
        for fd in (proc.stdout, proc.stderr, proc.report, proc.status):
            if fd in self.sel.get_map():
                self.sel.unregister(fd)
            os.close(fd)
        if proc.payload is not None:
            os.close(proc.payload)
        if proc.cgroup is None:
            self.uid_slots.discard(proc.slot)
        else:  # removed after this round's results are out, not before (retire); the uid waits for it
            self.retiring.append((proc.cgroup, proc.slot, time.monotonic()))

    def retire(self) -> None:
        """Remove the cgroups of finished children whose processes are all gone, and free their uid slots; SIGKILL
        what is left in the others (a job's stragglers) and try again on a later step. No uid is reused while a
        process of the job that had it may still run."""
        now = time.monotonic()
        left = []
        for cgroup, slot, since in self.retiring:
            if not cgroup.pids() and cgroup.try_remove():
                self.uid_slots.discard(slot)
                continue
            cgroup.signal_all()
            if since is not None and now - since > RETIRE_WARN_S:
                log(f"a finished job's cgroups still hold processes {cgroup.pids()} after {RETIRE_WARN_S:g} s")
                since = None
            left.append((cgroup, slot, since))
        self.retiring = left

    def complete(self, proc, status: int) -> None:
        """The job's process ended (or said it is ending) with this wait status: drain output, send the result."""
        job = proc.job
        job.status = status
        self.drain(proc)
        if job.id not in self.jobs:  # reading what was left failed, and _fail_job already answered for it
            return
        cg = proc.cgroup
        pools.note_gpu_pids(proc)
        job.cpu_s = job.cpu_used() if cg is not None else getattr(proc, "cpu_s", None)
        setup_error = None
        if not proc.ready:
            setup = bytes(proc.setup_out).decode(errors="replace")
            setup_error = "the sandbox could not start the job: " + (
                ("".join(job.text["stderr"]) + setup).strip()[-500:] or f"wait status {status}")
        report, asked = None, False
        try:
            result = job.result(cgroup_oom=bool(cg and cg.oom_killed()), pids_hit=bool(cg and cg.pids_refused()),
                                setup_error=setup_error)
            report, asked = job.passed_report()
        except Exception as exc:  # noqa: BLE001 - this job's result could not be made: it alone ends in error
            log(f"job {job.id}: {type(exc).__name__} while building its result: {exc}")
            result = startup.refused_result(UNREADABLE)
        self.forget_job(job.id)
        # the report goes on unread, after the frame's JSON; the runner reads it (jobstate.read_report)
        self.send({"op": "done", "id": job.id, "result": result, "report_asked": asked}, report)

    def check_limits(self) -> None:
        """Stop jobs past their wall-clock deadline or CPU allowance; keep an idle jobs' group from starving them."""
        now = time.monotonic()
        if self.cgroups is not None and self.jobs and self.cgroups.feed_jobs(now):
            self._note_starved(now)
        for job in list(self.jobs.values()):
            if job.status is not None or job.killed:
                continue
            pools.note_gpu_pids(job.child)
            if now >= job.deadline:
                self.kill(job, "wall")
            elif job.child.cgroup is not None:
                cpu = job.cpu_used()
                if cpu is not None and cpu >= job.limits.cpu_s:
                    job.cpu_s = cpu
                    self.kill(job, "cpu")
                elif self.ctx.isolate and not self.ctx.userns:  # the job runs as a uid of its own slot
                    self.refuse_forks_early(job)

    def _note_starved(self, now: float) -> None:
        """Tell the operator, once a STARVED_NOTE_S at most, that jobs starved for a core: something beside the
        sandbox wants every core, and jobs run slower than they should (their idle group is a normal one meanwhile)."""
        self.starved_since_note += 1
        if now - self.starved_noted_at >= STARVED_NOTE_S:
            log(f"jobs starved for a core ({self.starved_since_note} time(s) since the last such note): something "
                f"else on this host wants every core, so their idle cgroup is a normal one for {NORMAL_HOLD_S:g} s "
                "each time (COURSE_SANDBOX_JOBS_IDLE, docs/security.md#cpu)")
            self.starved_noted_at, self.starved_since_note = now, 0

    def refuse_forks_early(self, job: RunningJob) -> None:
        """Once the pids cgroup has refused one of the job's forks, have RLIMIT_NPROC refuse the next ones.

        The cgroup refuses a fork only after the kernel has copied the forking process's whole address space
        (cgroup_can_fork comes after copy_mm in Linux's copy_process): 2.6-3.0 ms of CPU per refused fork of a process
        with torch loaded, so a fork bomb that keeps retrying spent its core in the kernel (bench/README, "Jobs in an
        idle group"). RLIMIT_NPROC is checked before that copy (5.8 us per refusal), but its refusals leave no count,
        and the cgroup's count is how the learner is told that the limit was reached: so a job starts with the rlimit
        as a backstop above the cgroup's limit (child.py), and it comes down to the cgroup's limit here, once the
        cgroup has refused, and counted, a fork. A process forked between the listing and the lowering keeps the
        backstop; its first refusal is counted too, and the next check (within CPU_POLL_S) lowers its limit."""
        refused = job.child.cgroup.pids_refused()
        if refused > job.pids_refused:
            job.pids_refused = refused
            isolation.refuse_forks_early(job.child.cgroup.pids(), job.limits.pids, self.ctx.uid_base + job.child.slot)

    def on_control(self, reader: protocol.FrameReader) -> None:
        """Handle frames from the runner."""
        data = self.sock.recv(1 << 20)
        if not data:
            self.closing = True
            return
        for msg in reader.feed(data):
            if msg["op"] == "run":
                limits = Limits.from_dict(msg["limits"]) if msg.get("limits") else self.defaults
                if self.refuse:
                    self._send_error(msg["id"], self.refuse)
                else:
                    self.start_job(msg["id"], msg["payload"], limits, gpu=bool(msg.get("gpu")), key=msg.get("key"))
            elif msg["op"] == "cancel":
                self.cancel(msg["id"])

    def step(self, timeout: float | None = None) -> None:
        """Prepare and release children, start waiting jobs, then wait for one round of events and handle them."""
        self.refill_pools()
        for pool in (self.cpu_pool, self.gpu_pool):
            if pool is not None:
                pool.poll()
        self.dispatch()
        live = [j.deadline for j in self.jobs.values() if not j.killed]
        if self.jobs or self.waiting:
            nearest = min(live, default=time.monotonic() + CPU_POLL_S) - time.monotonic()
            timeout = max(0.0, min(CPU_POLL_S, nearest))
        if self.retiring:
            poll = RETIRE_POLL_S if any(since is not None for *_, since in self.retiring) else RETIRE_SLOW_S
            timeout = poll if timeout is None else min(timeout, poll)
        events = self.sel.select(timeout)
        for key, _ in events:
            if self.sel.get_map().get(key.fd) is not key:
                continue  # unregistered by an earlier handler in this round (a job completed)
            kind, obj = key.data
            if kind == "wake":
                while _readable(self._wake_r):
                    os.read(self._wake_r, 512)
            elif kind == "control":
                self.on_control(obj)
            elif kind == "zygote":
                pass  # its children's fates: read in reap(), below
            else:
                self.on_pipe(kind, obj)
        self.reap()
        self.check_limits()
        if self.retiring and (not events or len(self.retiring) > RETIRE_BACKLOG):
            self.retire()  # at a quiet moment (nothing was waiting to be read or sent), or when they pile up

    def install_wakeup(self) -> None:
        """Turn SIGCHLD into a readable pipe so the selector wakes when a job exits."""
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        signal.set_wakeup_fd(self._wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.sel.register(self._wake_r, selectors.EVENT_READ, ("wake", None))

    def serve(self) -> None:
        """Run until the runner closes the socket; then kill everything and clean up."""
        self.sel.register(self.sock.fileno(), selectors.EVENT_READ, ("control", protocol.FrameReader()))
        if self.zygote is not None:
            self.sel.register(self.zygote.sock.fileno(), selectors.EVENT_READ, ("zygote", None))
        try:
            self.send({"op": "ready", "info": self.info})
            while not self.closing:
                self.step()
        except ConnectionError:  # the runner went away (its process died) while we were writing to it
            log("the runner is gone; stopping")
        finally:
            self.shutdown()

    def shutdown(self) -> None:
        """Kill every child, remove cgroups and the staging directory."""
        self.closing = True
        for proc in list(self.children.values()):
            self._kill_proc(proc)
        deadline = time.monotonic() + 5
        self.send = lambda msg, *_: None  # type: ignore[method-assign]  # the runner is gone
        while (self.children or (self.starting and not self.zygote_gone)) and time.monotonic() < deadline:
            self.reap()
            time.sleep(0.01)
        for proc in list(self.starting):  # the zygote went before it forked them: only their pipes and groups
            self.finish(proc, childmod.SETUP_FAILED << 8)
        self.starting.clear()
        for cgroup, slot, _since in self.retiring:
            cgroup.sweep()
            cgroup.remove()
        self.retiring = []
        if self.zygote is not None:
            self.zygote.stop()
        if self.cgroups:
            self.cgroups.remove()
        if self.gpu_pool is not None and self.gpu_pool.monitor is not None:
            self.gpu_pool.monitor.close()
        shutil.rmtree(self.staging, ignore_errors=True)


def _within_frame(result: dict) -> dict:
    """The result cut to fit one frame: without its report (the run's results were too large to pass on), and with
    the tail of each stream only. The frame's size is what this server encodes, whatever the job sent."""
    budget = protocol.MAX_FRAME // 8  # characters per stream; JSON may spend up to 6 bytes on one
    cut = {k: (v if len(v) <= budget else "[sandbox] output shortened to its last part\n" + v[-budget:])
           for k, v in result.items() if k in ("stdout", "stderr")}
    return {**result, **cut, "report": None, "status": "error", "message": UNREADABLE}


def _readable(fd: int) -> bool:
    import select

    return bool(select.select([fd], [], [], 0)[0])


def main(argv: list[str]) -> int:
    """Entry point: `python -m app.sandbox.server CONFIG_JSON CONTROL_FD`."""
    import socket

    config, fd = json.loads(argv[1]), int(argv[2])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the runner, which stops us in order
    sock = socket.socket(fileno=fd)
    sock.setblocking(True)
    server = ForkServer(config, sock)
    # The runner's process may die without closing our socket in order (SIGKILL, OOM): then stop too, through the
    # same orderly shutdown as a closed socket (children killed, cgroups and staging removed). The runner starts
    # us in a session of our own, so a signal to its process group does not reach us. (Had it died before the
    # prctl, its end of the socket is closed and the first read or write stops us.)
    signal.signal(signal.SIGTERM, lambda *_: setattr(server, "closing", True))
    isolation.prctl(isolation.PR_SET_PDEATHSIG, signal.SIGTERM)
    try:
        server.install_wakeup()
        server.prepare()
    except Exception as exc:  # noqa: BLE001 - tell the runner why, then exit
        traceback.print_exc()
        server.send({"op": "ready", "info": {"refuse": f"the sandbox server failed to start: {exc}"}})
        return 1
    server.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
