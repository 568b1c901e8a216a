"""The fork server's pools of children waiting for a job.

PreforkPool (CPU jobs, the default): children forked from the warm server isolate themselves at once and wait;
a job whose limits differ from the defaults gets a child of its own, forked for it. The waiting children build the
default machine's simulated host ahead (app/harness/session.py ahead), and one more waits that builds nothing: a
job for that machine takes one that did (half its CPU after hand-over), any other job the one that did not (or a
child forked for it), so nothing built for one machine is ever undone for another.

SpawnPool (GPU slots, and CPU jobs when COURSE_SANDBOX_POOL=spawn): one child per slot, made fresh for one job.
It warms up for its device (on a GPU: its own CUDA context, see app/sandbox/warm.py), *then* isolates, waits for
one job, and exits; the job's own limits are applied when it is handed over. A slot takes its next child only
once it is released: for a GPU, when NVML lists no process of the finished job on it. A job waits for a ready
child; it never starts a second one on a busy slot. The CPU mode runs exactly this logic on CPU "slots", so the
GPU pool's bookkeeping is exercised on every test run, on hosts without a GPU.

Children here are forked from the fork server, which never initialises CUDA: the restriction CUDA has is on
forking *after* initialising it. A fresh interpreter (exec) would add ~1-2 s of imports to every child's
preparation, which lies between two jobs on the same GPU (docs/architecture.md has the figures).
"""

from __future__ import annotations

import json
import select
import subprocess
import sys
import time
from dataclasses import dataclass, field

from app.harness.contract import fits_ahead
from app.sandbox import gpus
from app.sandbox.startup import log
from app.sandbox.warm import Warm

# consecutive failed preparations after which a slot is taken out (the reason goes to the waiting jobs)
MAX_FAILURES = 3
# seconds between two NVML looks at a slot whose finished job still has a process on the GPU
RELEASE_POLL_S = 0.1
# seconds after which a slot still held by a finished job is logged (again every this many seconds)
RELEASE_WARN_S = 30
# seconds the monitor may take to answer one question before the slot is asked about again
MONITOR_TIMEOUT_S = 2.0


def make_pools(server, gpu_slots: list, root: bool) -> tuple:
    """Return (CPU jobs' pool per COURSE_SANDBOX_POOL, the GPU slots' pool or None, why GPU slots cannot be used)."""
    config = server.config
    warm = Warm(dev_root=config.get("gpu_dev_root", gpus.HOST_DEV),
                gpu_memory_bytes=int(config.get("gpu_memory_bytes", 0)),
                probe_thread=bool(config.get("warm_probe_thread")))
    if config.get("pool", "prefork") == "spawn":
        cpu_pool = SpawnPool(server, [None] * max(1, int(config.get("cpu_slots", 1))), warm)
    else:
        cpu_pool = PreforkPool(server, server.prefork, config.get("ahead_host"))
    if not gpu_slots:
        return cpu_pool, None, None
    if not root:
        return cpu_pool, None, ("GPU slots need the sandbox to run as root (device nodes bound into each job's "
                                "root, a devices cgroup per job); run the app as root")
    if "devices" not in (server.cgroups.controllers if server.cgroups else []):
        log("WARNING: no devices cgroup here: a GPU job's /dev holds only its GPU's nodes, but nothing else "
            "refuses another GPU's node (cgroup v1's devices controller is needed)")
    monitor = NvmlMonitor() if warm.dev_root == gpus.HOST_DEV else None
    return cpu_pool, SpawnPool(server, gpu_slots, warm, monitor), None


def note_gpu_pids(proc) -> None:
    """Remember the pids of a GPU job while it runs: its slot is released once NVML lists none of them."""
    if proc.warm is not None and proc.warm.gpu is not None and proc.cgroup is not None:
        proc.pids_seen.update(proc.cgroup.pids())


class PreforkPool:
    """Isolate-first children with the default limits, kept `size` at a time."""

    kind = "prefork"

    def __init__(self, server, size: int, ahead: dict | None = None) -> None:
        self.server, self.size = server, size
        self.ahead = ahead  # the host (SimulatedHost payload) whose session children build ahead; None: none do
        self.waiting: list = []
        self.failures = 0

    def refill(self, hold: bool = False, busy: bool = False) -> None:
        """Keep `size` isolated children waiting for code (default limits only).

        hold: a job was just handed over. Then only an empty pool is refilled: the server no longer waits for the
        zygote's fork (zygote.py), but the fork (it copies the page tables of torch's heap: 5 ms idle, 60 ms on a
        loaded host), the new child's isolation and its cgroups' creation take CPU from a short job that has just
        started, on a host with few cores. busy: the jobs running, queued and just ended fill the cores jobs may
        use (JobQueue.refill_pools)."""
        if hold and self.waiting:
            return
        # `size` children that build the default machine's session, and one that builds nothing for other jobs
        # (with one kind only, a job on the default machine that comes while its child still builds would take the
        # plain one: the pool's depth is what hides a child's preparation)
        wanted = self.size + (1 if self.ahead is not None and self.size else 0)
        # a child made while the sandbox is busy skips the page warm-ups (prepare_ahead) and builds only the session:
        # every child it makes is soon taken, and the warm-ups cost the child more CPU than they spare its job
        # (878756e has the figures). A child made while a core is free warms up there, for a lone learner's shorter
        # job: this includes one made while that learner's own graded job runs (most run past REFILL_HOLD_S), whose
        # cold child took ~1,850 more page faults in the next graded training-loop run, 8-11 ms of its CPU
        # (bench/README.md, "A lone learner's next child").
        warm_ahead = not busy
        while len(self.waiting) < wanted and self.failures < MAX_FAILURES:
            ahead, spare = self._next_ahead()
            self.waiting.append(self.server.spawn_child(self.server.defaults, ahead=ahead, spare=spare,
                                                        warm_ahead=warm_ahead))

    def _next_ahead(self) -> tuple[dict | None, bool]:
        """What the next child builds ahead: the default machine's session until `size` waiting children have,
        then nothing; and whether it forks a spare for a graded job's copy (app/harness/elsewhere.py): one of them
        does, where there are two or more, so that a job without copies still finds one without (a spare costs
        CPU that such a job would pay for nothing: the fork, the spare's own session built ahead, and the spare's
        exit)."""
        if self.ahead is None or sum(c.ahead is not None for c in self.waiting) >= self.size:
            return None, False
        return self.ahead, self.size > 1 and not any(getattr(c, "spare", False) for c in self.waiting)

    def take(self, limits, net: str | None = None, payload: dict | None = None):
        """Return a child for a job with these limits: a waiting one, or one forked for it (always for a job of
        several ranks or one that asks for its loopback: its isolation differs, see child._isolate). A child that
        built a session ahead takes only a job that fits it (contract.fits_ahead); such a job prefers one, among
        the children ready first (one still isolating itself, or building, would make the job wait for it). A
        graded job with copies elsewhere prefers the one with a spare, any other job one without."""
        if limits == self.server.defaults and not net:
            fits = payload is not None and fits_ahead(payload, self.ahead)
            copies = fits and payload.get("mode") == "grade" and bool((payload.get("grade") or {}).get("elsewhere"))
            kinds = ((self.ahead, copies), (self.ahead, not copies), (None, False)) if fits else ((None, False),)
            for ready in (True, False):
                for want, spare in kinds:
                    for child in self.waiting:
                        if (child.ahead == want and bool(getattr(child, "spare", False)) == spare
                                and bool(getattr(child, "ready", True)) == ready):
                            self.waiting.remove(child)
                            return child
        return self.server.spawn_child(limits, net=net)

    def exited(self, proc, had_job: bool) -> None:
        """A child (its job process, or its outer child) was reaped."""
        if not had_job and proc in self.waiting:
            self.waiting.remove(proc)
            self.failures += 1

    def poll(self) -> None:
        """Nothing to release: a CPU child holds nothing once it is gone."""

    def describe(self) -> dict:
        return {"kind": self.kind, "size": self.size}


@dataclass
class Slot:
    """One place in a SpawnPool: a GPU (or, in CPU mode, nothing) and the single child prepared for it."""

    index: int
    gpu: gpus.GpuSlot | None
    state: str = "empty"  # empty -> preparing -> (ready when its child said so) -> busy -> releasing -> empty
    proc: object | None = None
    failures: int = 0
    broken: str | None = None  # why the slot was taken out
    job_pids: set[int] = field(default_factory=set)
    released_since: float = 0.0
    warned_at: float = 0.0
    last_setup: str = ""


class SpawnPool:
    """Warm-first, single-use children, one per slot; see the module docstring."""

    kind = "spawn"

    def __init__(self, server, gpu_slots: list[gpus.GpuSlot | None], warm: Warm, monitor=None) -> None:
        self.server, self.warm, self.monitor = server, warm, monitor
        self.slots = [Slot(i, g) for i, g in enumerate(gpu_slots)]

    def refill(self, hold: bool = False, busy: bool = False) -> None:
        """Prepare a child for every empty slot (held or not: a job may be waiting for one; busy or not)."""
        for slot in self.slots:
            if slot.state == "empty" and slot.broken is None:
                warm = Warm(gpu=slot.gpu, dev_root=self.warm.dev_root, gpu_memory_bytes=self.warm.gpu_memory_bytes,
                            probe_thread=self.warm.probe_thread)
                slot.proc = self.server.spawn_child(self.server.defaults, warm=warm)
                slot.proc.pool_slot = slot
                slot.state = "preparing"

    def take(self, limits, net: str | None = None, payload: dict | None = None):
        """Return a ready child (its slot now busy), None to wait, or a string: why no slot will ever be ready.

        A job of several ranks, or one asking for its loopback (net), gets a warm-first child made for it, outside
        the slots: a slot's child was isolated before its job was known, without the loopback. (Only CPU pools see
        such jobs: the server refuses them on GPU slots.)"""
        if net:
            return self.server.spawn_child(limits, warm=Warm(dev_root=self.warm.dev_root), net=net)
        for slot in self.slots:
            if slot.state == "preparing" and slot.proc.ready:
                slot.state, slot.job_pids = "busy", set()
                return slot.proc
        if all(s.broken for s in self.slots):
            return "; ".join(f"slot {s.index}: {s.broken}" for s in self.slots)
        return None

    def exited(self, proc, had_job: bool) -> None:
        """The slot's child is gone: after a job, release the slot; before one, count a failed preparation."""
        slot = getattr(proc, "pool_slot", None)
        if slot is None or slot.proc is not proc:
            return
        if had_job:
            slot.failures = 0
            slot.job_pids = set(proc.pids_seen) | {proc.pid}
            slot.state, slot.released_since = "releasing", time.monotonic()
            self._try_release(slot)
            return
        slot.failures += 1
        slot.last_setup = self.server.setup_text(proc)
        slot.state = "empty"
        if slot.failures >= MAX_FAILURES:
            slot.broken = f"could not prepare a child {slot.failures} times: {slot.last_setup[-300:]}"
            log(f"slot {slot.index} taken out: {slot.broken}")

    def poll(self) -> None:
        """Release the slots whose finished job has left its GPU."""
        for slot in self.slots:
            if slot.state == "releasing":
                self._try_release(slot)

    def _try_release(self, slot: Slot) -> None:
        if slot.gpu is None or self.monitor is None:  # a CPU slot, or a test tree without NVML: nothing held
            slot.state = "empty"
            return
        running = self.monitor.running_pids(slot.gpu.uuid)
        if running is not None and gpus.slot_released(running, slot.job_pids):
            slot.state = "empty"
            return
        now = time.monotonic()
        if now - slot.released_since > RELEASE_WARN_S and now - slot.warned_at > RELEASE_WARN_S:
            slot.warned_at = now
            log(f"GPU slot {slot.index} (GPU {slot.gpu.id}) still held {now - slot.released_since:.0f} s after its "
                f"job: NVML lists pids {running}, the job had {sorted(slot.job_pids)}")

    def describe(self) -> dict:
        return {"kind": self.kind, "size": len(self.slots),
                "slots": [{"index": s.index, "gpu": s.gpu.to_dict() if s.gpu else None, "state": s.state,
                           "broken": s.broken} for s in self.slots]}


class NvmlMonitor:
    """The fork server's window on NVML: a separate small process, so the server never loads the NVML library."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None

    def _start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "app.sandbox.nvml"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1)

    def running_pids(self, uuid: str) -> list[int] | None:
        """Return the pids NVML lists on this GPU, or None when it could not say (the slot then stays out)."""
        try:
            if self.proc is None or self.proc.poll() is not None:
                self._start()
            self.proc.stdin.write(uuid + "\n")
            self.proc.stdin.flush()
            if not select.select([self.proc.stdout], [], [], MONITOR_TIMEOUT_S)[0]:
                raise TimeoutError(f"no answer in {MONITOR_TIMEOUT_S:g} s")
            reply = json.loads(self.proc.stdout.readline() or "{}")
        except (OSError, ValueError, TimeoutError) as exc:
            log(f"the GPU monitor failed ({exc}); restarting it")
            self.close()
            return None
        if "pids" not in reply:
            log(f"NVML could not list the processes on {uuid}: {reply.get('error', reply)}")
            return None
        return reply["pids"]

    def close(self) -> None:
        """Stop the monitor process."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
