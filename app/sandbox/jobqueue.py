"""The fork server's job queue: jobs wait for a child of their pool, then are handed over; children are forked.

A mixin of ForkServer (server.py), which owns the state these methods use: the pools, the running jobs, the
selector that watches every child's pipes, the cgroups, the prepared isolation context.
"""

from __future__ import annotations

import json
import os
import selectors
import struct
import time

from app.sandbox import child as childmod
from app.sandbox import gpus, startup
from app.sandbox.job_limits import Limits
from app.sandbox.jobstate import RunningJob
from app.sandbox.startup import log
from app.sandbox.warm import Warm

# seconds after a job is handed over during which the pools are not topped up while it runs (see refill_pools)
REFILL_HOLD_S = 0.05
# the payload's length, before it (app/harness/channel.py reads it: the pipe stays open for the key)
PAYLOAD_HEADER = struct.Struct(">Q")
# why a job of several ranks cannot have real GPUs yet (docs/grading.md, "Several ranks")
RANKS_ON_GPUS = ("a job of several ranks cannot run on this host's GPU slots yet (each slot holds one GPU, and a "
                 "rank needs its own); run it without needs_gpu: it runs on simulated GPUs")
# and why a one-process job with its own loopback cannot either: a slot's child isolated itself before its job was
# known, without a loopback, and a child made for the job outside the slots would hold no GPU
LOOPBACK_ON_GPUS = ("a job that asks for its own loopback cannot run on this host's GPU slots yet; run it without "
                    "needs_gpu: it runs on simulated GPUs")


def network_of(payload: dict) -> str | None:
    """The job's own loopback, if it gets one (child.LOOPBACK, RANKS; see child._isolate): every job of several
    ranks, and a one-process job that asks (`loopback`: a one-rank gloo group, which binds to 127.0.0.1); None for
    every other job (its Unix sockets still work, inside the job: DataLoader workers need no loopback)."""
    if ranks_of(payload) > 1:
        return childmod.RANKS
    return childmod.LOOPBACK if payload.get("loopback") is True else None


def ranks_of(payload: dict) -> int:
    """How many rank processes a job's payload asks for (1: an ordinary job)."""
    try:
        return max(1, int(payload.get("nproc") or 1))
    except (TypeError, ValueError):
        return 1


def copies_of(payload: dict, real_gpu: bool = False) -> int:
    """How many copies of the learner's program a job runs at once: a graded job runs one more per other machine
    its checks name (`elsewhere`, app/harness/elsewhere.py), except on a real GPU, which cannot be hidden from
    the program (nothing is forked there); 1 for every other job."""
    grade = payload.get("grade")
    others = grade.get("elsewhere") if isinstance(grade, dict) and payload.get("mode") == "grade" else None
    return 1 + len(others) if isinstance(others, list) and not real_gpu else 1


def has_modeled_clock(payload: dict) -> bool:
    """Whether a job's program runs on a simulated GPU's clock (SimulatedHost.payload()'s `clock`): its wall and CPU
    limits' sentences then say why a loop until GPU time has passed runs out (jobstate.MODELED_CLOCK_HINTS)."""
    host = payload.get("host")
    return isinstance(host, dict) and bool(host.get("clock"))


class JobQueue:
    """Waiting jobs, children made for them, and the hand-over of a job to a child."""

    def _new_uid_slot(self) -> int:
        slot = 0
        while slot in self.uid_slots:
            slot += 1
        self.uid_slots.add(slot)
        return slot

    def spawn_child(self, limits: Limits, warm: Warm | None = None, net: str | None = None,
                    ahead: dict | None = None, spare: bool = False, warm_ahead: bool = False):
        """Fork one child (warm: a warm-first one, for the spawn pool; net: for a job with its own loopback,
        network_of; ahead: one that builds this host's session before its job comes, PreforkPool; spare: with
        ahead, one that also forks the spare for a graded job's copy; warm_ahead: one the pool keeps waiting, which
        warms its pages first) and watch its pipes."""
        if warm is not None and warm.gpu is not None and _cuda_initialised():
            raise RuntimeError("the fork server has initialised CUDA: its children could not make CUDA contexts")
        slot = self._new_uid_slot()
        devices = self.base_devices + [gpus.device_numbers(src) for src, _ in (warm.devices() if warm else ())]
        cgroup = self.cgroups.new_job(limits, devices) if self.cgroups else None
        try:
            proc = childmod.spawn(self.zygote, limits, slot, cgroup, warm, net, isolate=self.ctx.isolate,
                                  userns=self.ctx.userns, ahead=ahead, spare=spare, warm_ahead=warm_ahead)
        except BaseException:
            self.uid_slots.discard(slot)
            if cgroup is not None:
                cgroup.remove()
            raise
        self.starting.append(proc)  # its pid comes later (ForkServer.reap): the server does not wait for the fork
        for fd, kind in ((proc.stdout, "stdout"), (proc.stderr, "stderr"), (proc.report, "report"),
                         (proc.status, "status")):
            self.sel.register(fd, selectors.EVENT_READ, (kind, proc))
        proc.job = None
        proc.ready = False
        return proc

    def setup_text(self, proc) -> str:
        """Return what a child printed before it was given a job (its setup failure, if any)."""
        return bytes(proc.setup_out).decode(errors="replace").strip()

    def refill_pools(self) -> None:
        """Prepare the children the pools keep waiting, unless the server refuses to run code or is closing."""
        if self.refuse is None and not self.closing:
            # a job handed over within REFILL_HOLD_S and still running: most jobs end sooner, and their result
            # goes out first (PreforkPool.refill says why); the step after the hold tops the pool up
            now = time.monotonic()
            running = [job for job in self.jobs.values() if job.status is None]
            hold = any(now - job.started < REFILL_HOLD_S for job in running)
            # busy: the jobs running, queued, and ended within REFILL_HOLD_S fill the cores jobs may use, so a child
            # made now skips its warm-ups (PreforkPool.refill says why); a lone learner's job leaves a core for them.
            # A job that has just ended counts: under load the runner sends the next as soon as it has its result
            ended = sum(1 for t in self.ended if now - t < REFILL_HOLD_S)
            busy = len(running) + len(self.waiting) + ended >= self.job_cores()
            for pool in (self.cpu_pool, self.gpu_pool):
                if pool is not None:
                    pool.refill(hold, busy=busy)

    def forget_job(self, job_id: str) -> bool:
        """Take a job off the running ones as its result goes out (False: it was not there); remember when."""
        if self.jobs.pop(job_id, None) is None:
            return False
        self.ended.append(time.monotonic())
        return True

    def job_cores(self) -> float:
        """The cores all jobs together may use: the jobs' parent group's cap (COURSE_SANDBOX_CPU_RESERVE), else this
        server's."""
        cgroups = self.cgroups
        return (cgroups.jobs_cores() or cgroups.cores) if cgroups is not None else float(len(os.sched_getaffinity(0)))

    def start_job(self, job_id: str, payload: dict, limits: Limits, gpu: bool = False, key: str | None = None) -> None:
        """Queue a job for a child of its pool (a GPU slot's when it asks for a GPU and there are slots).

        A job of several ranks (payload `nproc` > 1), or one that asks for `loopback`, gets a child made for it:
        one whose network namespace has its loopback up and whose seccomp filter lets the job's processes talk
        over it (child._isolate), under the limits of the whole group of ranks (Limits.for_ranks; a one-process
        job keeps its own). key: what the job's report must echo, handed to the job's harness once, when it asks
        after the learner's code has run (channel.py); never part of the payload."""
        if gpu and self.gpu_refuse:
            self._send_error(job_id, self.gpu_refuse)
            return
        nproc = ranks_of(payload)
        net = network_of(payload)
        if net and gpu and self.gpu_pool is not None:
            self._send_error(job_id, RANKS_ON_GPUS if nproc > 1 else LOOPBACK_ON_GPUS)
            return
        pool = self.gpu_pool if gpu and self.gpu_pool else self.cpu_pool
        self.waiting.append((job_id, payload, limits.for_ranks(nproc), pool, net, key))
        self.dispatch()

    def dispatch(self) -> None:
        """Hand each waiting job, oldest first, to a ready child of its pool."""
        for entry in list(self.waiting):
            job_id, payload, limits, pool, net, key = entry
            proc = pool.take(limits, net, payload)
            if proc is None:
                continue
            self.waiting.remove(entry)
            if isinstance(proc, str):
                self._send_error(job_id, f"no GPU slot can take jobs: {proc}")
            else:
                self._hand_over(proc, job_id, payload, limits, key)

    def _hand_over(self, proc, job_id: str, payload: dict, limits: Limits, key: str | None) -> None:
        """Give the child its payload and start the job's wall clock; the payload pipe stays open for the key."""
        if proc.warm is not None:  # made before its job was known: the job's own limits apply from now
            payload = {**payload, "sandbox_limits": limits.to_dict()}
            if proc.cgroup is not None and limits != proc.limits:
                try:
                    proc.cgroup.set_limits(limits)
                except OSError as exc:
                    log(f"could not apply job {job_id}'s limits to its warm child: {exc}")
            proc.limits = limits
        copies = copies_of(payload, real_gpu=proc.warm is not None and proc.warm.gpu is not None)
        if proc.cgroup is not None and copies > 1:  # one core per copy (JobCgroup.set_cores), before it starts
            try:
                proc.cgroup.set_cores(copies)
            except OSError as exc:
                log(f"could not give job {job_id} a core per copy of its program: {exc}")
        job = RunningJob(job_id, proc, self.send, key=key, modeled_clock=has_modeled_clock(payload))
        job.cpu_base = (proc.cgroup.cpu_seconds() or 0.0) if proc.cgroup is not None else 0.0
        proc.job = job
        self.jobs[job_id] = job
        data = json.dumps(payload).encode()
        data = PAYLOAD_HEADER.pack(len(data)) + data
        try:
            if len(data) > childmod.PAYLOAD_PIPE_BYTES:
                raise ValueError(f"job payload is {len(data)} bytes; at most {childmod.PAYLOAD_PIPE_BYTES}")
            os.write(proc.payload, data)
        except (OSError, ValueError) as exc:  # the child already died in setup: its result says why
            log(f"could not hand over job {job_id}: {exc}")
            os.close(proc.payload)
            proc.payload = None

    def _send_error(self, job_id: str, message: str) -> None:
        self.send({"op": "done", "id": job_id, "result": startup.refused_result(message)})

    def cancel(self, job_id: str) -> None:
        """Stop a running job, or drop one still waiting for a child."""
        if job_id in self.jobs:
            self.kill(self.jobs[job_id], cancelled=True)
            return
        for entry in list(self.waiting):
            if entry[0] == job_id:
                self.waiting.remove(entry)
                result = {**startup.refused_result("cancelled before it started"), "status": "cancelled"}
                self.send({"op": "done", "id": job_id, "result": result})


def _cuda_initialised() -> bool:
    """Whether this process made a CUDA context (asking does not make one); the fork server never may."""
    import torch

    return torch.cuda.is_initialized()
