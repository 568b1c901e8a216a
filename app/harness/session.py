"""One job's view of the machine: the simulated host's parts, wired together before the learner's code runs.

Both modes use it: a plain run gets the simulated host (so `course run` sees the GPUs a grader would), a graded
run gets the same plus the facts the tracer records. Where the job really has CUDA nothing is simulated.

A sandbox child waiting in the pool may build the session ahead, for the default machine, before its job comes
(`ahead`): this wiring was 3.3 ms of a short job's 13 ms end to end. The fork server hands such a child only a
job that `contract.fits_ahead` (app/sandbox/pools.py), whose prepare() then only names the learner's file and
starts the clock again; nothing is undone: a job for another machine goes to a child that built nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from app.harness.contract import PLAIN_CPU, JobPayload, SimulatedHost, fits_ahead
from app.harness.machine import profiler
from app.harness.machine.builds import Availability
from app.harness.machine.checkpoints import Checkpoints
from app.harness.machine.clock import CLOCK
from app.harness.machine.cuda_runtime import CudaRuntime, Patches
from app.harness.machine.devices import Devices
from app.harness.machine.distributed import Distributed
from app.harness.machine.memory import Memory
from app.harness.machine.mps import MpsRuntime
from app.harness.tracing import placement


@dataclass
class Session:
    """What the harness installed for one job."""

    host: SimulatedHost
    real_cuda: bool
    simulated: bool
    devices: Devices
    availability: Availability
    tracer: placement.Tracer
    distributed: Distributed

    def device_line(self) -> str:
        """The device the verdict names: "cuda:0 (simulated on CPU)" or the real GPU's name."""
        if self.real_cuda:
            index = int(self.tracer.accelerator.rsplit(":", 1)[1])
            return f"cuda:{index} ({torch.cuda.get_device_name(index)})"
        if not self.simulated or self.host.devices_present() == 0:
            return "cpu"
        return f"{self.tracer.accelerator} (simulated on CPU)"


# the session built ahead (before the job's payload came), and the host payload it was built for; None: not built
_AHEAD: tuple[dict, Session] | None = None
# what ahead() builds with for the learner's file until the job names it (the tracer asks nothing of it before)
_AHEAD_FILE = "main.py"


# warm_simulation's program: a training step, with the tracer's module and optimizer hooks called as torch calls them
_WARM_UP_STEP = """\
moved = torch.nn.Linear(1, 1).to(device)
batch = batch.to(device)
tracer._forward_pre_hook(model, (xb,))
loss = torch.nn.functional.mse_loss(model(xb), xb)
optimizer.zero_grad()
loss.backward()
tracer._step_pre_hook(optimizer, (), {})
optimizer.step()
tracer._step_post_hook(optimizer, (), {})
print_value = loss.item()
"""


def _no_lazy_init() -> None:
    """torch.cuda._lazy_init while warm_simulation's moves run: CUDA stays uninitialised for the job."""


def warm_simulation(host: dict, keep=None) -> None:
    """In a waiting sandbox child, before it builds its session ahead: one step of a small training loop through a
    throwaway tracer on `host`'s simulated GPU, as a learner's file (the mode's fused path, labels, the memory model
    and its allocator, the modeled clock, backward, an optimizer step and its hooks, a host read, the facts a graded
    run gathers and its report), then everything it touched put back. keep(tracer), where given, is called with the
    throwaway tracer once the step ran (grade.keep_warm_report: what a graded job does after its run).

    The child shares the fork server's memory until it writes to it, and the simulation's code and objects are
    written to (reference counts, Python's specialised bytecode) only once a program runs through them: a
    training-loop run job took ~350 more copy-on-write faults than the same program on the plain CPU, ~2.4 us of
    CPU each (startup.warm_pages does the same for torch's own pages). Measured in forked copies of a warmed
    server (2026-12-05, time.process_time, medians of 40 alternated runs against main): the job's CPU -1.2 ms as a
    run job, -1.4 ms graded (faults 850 -> 580, 1,280 -> 950), for ~2.8 ms more of the waiting child's. Nothing of
    it stays: its tracer, devices and memory are its own and are gone before the session is built, the modeled
    clock is unconfigured again (_build configures it afresh), the host's random state is put back, and no hook or
    patch is installed; only caches any job fills the same way (the mode's facts per function, torch.device
    objects)."""
    import gc

    simulated = SimulatedHost.from_payload(host)
    if not simulated.simulated or not simulated.cuda or not simulated.clock or torch.cuda.is_available():
        return
    state, lazy_init = torch.get_rng_state(), torch.cuda._lazy_init
    tracer = placement.Tracer("<warm-up>", simulated=True, devices=Devices(simulated), memory=Memory())
    try:
        model = torch.nn.Sequential(torch.nn.Linear(1, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        CLOCK.configure(simulated.clock)
        for p in model.parameters():
            tracer.set_label(p, "cuda:0")
        xb = torch.linspace(-1, 1, 8).unsqueeze(1)
        tracer.set_label(xb, "cuda:0")
        tracer.mode = placement.PlacementMode(tracer)
        program = {"torch": torch, "model": model, "optimizer": optimizer, "xb": xb, "tracer": tracer,
                   "batch": torch.zeros(8, 1), "device": torch.device("cuda")}
        # the moves place tensors on the GPU, which initialises CUDA (torch.cuda._lazy_init: the seeding calls it
        # queued run, is_initialized() says True): the job's own first placement must still do that, so here it
        # does nothing
        torch.cuda._lazy_init = _no_lazy_init
        try:
            with tracer.mode:  # as the learner's file, so the facts a graded run gathers are gathered too
                exec(compile(_WARM_UP_STEP, tracer.learner_file, "exec"), program)
        finally:
            torch.cuda._lazy_init = lazy_init
        if keep is not None:
            keep(tracer)
        del model, optimizer, xb, program, p
    except Exception:  # the job's first steps are only slower (the finally puts back what it touched)
        pass
    finally:
        tracer.mode = None
        del tracer
        gc.collect()  # every tensor it labelled is gone (and counted off its own memory) before the job's clock
        CLOCK.configure(None)
        torch.set_rng_state(state)


# the modules whose seeding torch.manual_seed queues until they initialise (torch/random.py: _manual_seed_impl)
_SEEDED_LATER = (torch.cuda, torch.xpu, torch.mtia)


def warm_seeding() -> None:
    """In a waiting sandbox child, once its session is built ahead: seed as the learner's torch.manual_seed will,
    then put back what it set. CUDA's, XPU's and MTIA's seeding waits in their queues until they initialise, each
    queued with traceback.format_stack() (startup.warm_up says why); run cold in a job, torch.manual_seed cost
    ~0.7 ms more CPU than a second call (a real sandbox job, thread_time, 0.72 vs 0.22 ms, medians of 12,
    2026-12-05): first runs of that code. Put back: the host generator's state (its seed with it) and each queue's
    entries. Skipped where one of them initialised, or the host has the Mac's GPU (whose generator it would seed)."""
    if torch._C._has_mps or any(module.is_initialized() for module in _SEEDED_LATER):
        return
    queued = [dict(vars(module._lazy_seed_tracker)) for module in _SEEDED_LATER]
    state = torch.get_rng_state()
    try:
        torch.manual_seed(0)
    finally:
        for module, saved in zip(_SEEDED_LATER, queued):
            vars(module._lazy_seed_tracker).clear()
            vars(module._lazy_seed_tracker).update(saved)
        torch.set_rng_state(state)


def warm_first_placement() -> None:
    """In a waiting sandbox child, once its session is built ahead: rehearse torch's CUDA initialisation on that
    session and undo it (CudaRuntime.rehearse_init), so the job's first placement runs warm code."""
    if _AHEAD is not None and _AHEAD[1].simulated:
        _AHEAD[1].availability.runtime.rehearse_init()


def ahead(host: dict) -> None:
    """Build the session of a one-process job on `host` now, before the job is known (a pre-forked child, after
    it isolated itself: the job's own environment, root and uid). prepare() takes it over for a job that
    fits_ahead; the clock's real starting points are taken again then."""
    global _AHEAD
    if _AHEAD is not None:
        raise RuntimeError("a session was already built ahead in this process")
    payload: JobPayload = {"host": host, "nproc": 1}
    if not fits_ahead(payload, host):
        raise ValueError(f"no session can be built ahead for this host: {host}")
    # grading=False serves a graded job too: `grading` only matters where the host is not simulated, and
    # fits_ahead takes simulated hosts only (with real CUDA, nothing is simulated either way)
    _AHEAD = (host, _build(payload, _AHEAD_FILE, grading=False))


def prepare(payload: JobPayload, filename: str, *, grading: bool) -> Session:
    """Install the simulated host the payload describes (and the tracer); return the pieces.

    In a rank of a job of several ranks (payload `rank`), the rank's own GPU is cuda:LOCAL_RANK. Where this process
    built the session ahead (ahead()), the job takes it over: it must fit it.

    A run that is not graded reports no facts, so the tracer's hooks that only gather them go (Hooks.stop_observing,
    as on elsewhere.py's other machines): every module call and optimizer step of a training loop paid for them.
    The simulation stays as it was, and so do nn.Module's frames in a traceback (an empty hook keeps them)."""
    global _AHEAD
    if _AHEAD is not None:
        host, built = _AHEAD
        if not fits_ahead(payload, host):  # the fork server never hands such a job to this child
            raise RuntimeError("this sandbox child built the simulated host of another machine than its job's")
        _AHEAD = None
        job = _take_over(built, filename)
    else:
        job = _build(payload, filename, grading=grading)
    if not grading:
        job.tracer.stop_observing(batches=False, module_frames=True)
    return job


def _take_over(built: Session, filename: str) -> Session:
    """The job starts on a session built ahead: the learner's file gets its name, and the modeled clock reads the
    real clocks from now (the child may have waited minutes for its job)."""
    tracer = built.tracer
    tracer.learner_file = filename
    tracer._frame_kinds.clear()  # frames classified while building, against the stand-in name
    if tracer.mps is not None:
        tracer.mps.learner_file = filename
    if CLOCK.active:
        CLOCK.rebase()
    return built


def _build(payload: JobPayload, filename: str, *, grading: bool) -> Session:
    """prepare()'s work: build and install the session the payload's host asks for."""
    real_cuda = torch.cuda.is_available()  # in the child only: touching CUDA in the fork server poisons fork
    index = int((payload.get("rank") or {}).get("local_rank", 0))
    host = SimulatedHost.from_payload(payload.get("host"))
    simulated = not real_cuda and host.simulated
    devices = Devices(host if not real_cuda else PLAIN_CPU)
    memory = Memory(capacity=lambda gpu: host.gpu_memory_bytes)
    runtime = CudaRuntime(devices, memory)
    memory.fraction = lambda gpu: runtime.fractions.get(gpu, 1.0)  # set_per_process_memory_fraction's allowance
    # a graded job's probe may switch scenarios even on a CPU-only build; a plain one never does
    # the Mac's GPU, also for a probe's "and on a Mac?" scenario (its working set is the Mac profile's memory)
    mps = MpsRuntime(host.gpu_memory_bytes if host.mps else 48 << 30)
    mps.learner_file = filename
    availability = Availability(devices, runtime, simulated=not real_cuda and (simulated or grading), mps=mps)
    availability.install()
    accelerator = f"{host.accelerator}:{index}" if host.accelerator else "cpu"
    tracer = placement.Tracer(filename, simulated=simulated, devices=devices, memory=memory,
                              accelerator=f"cuda:{index}" if real_cuda else accelerator)
    tracer.mps = mps
    if simulated and host.mps:
        mps.watch_import(filename)
    tracer.install()
    distributed = Distributed(tracer, simulated=simulated)
    distributed.install()
    availability.remember_functions()  # the tracer wrapped some to see the learner's questions
    if simulated and host.cuda:
        Checkpoints(memory, tracer.set_label).install()
    if simulated and host.clock:  # the simulated GPU's clock, and the program's clocks reading it
        CLOCK.configure(host.clock)
        CLOCK.line_finder = lambda: tracer.line_of(tracer.learner_frame())
        CLOCK.install_clocks(Patches())
        profiler.install(Patches())  # torch.profiler's CUDA columns and trace on the modeled clock
    return Session(host=host, real_cuda=real_cuda, simulated=simulated, devices=devices,
                   availability=availability, tracer=tracer, distributed=distributed)
