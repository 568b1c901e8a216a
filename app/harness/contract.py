"""The contract across the sandbox boundary: what the app hands a job, and what the job's harness reports back.

Imported on both sides: by the runner and the grader outside the sandbox, by the harness inside it (which
imports nothing of `app` outside app/harness). Three things cross:

    JobPayload     the job: the learner's code, the mode, the exercise's probe, the simulated host, the ranks
    SimulatedHost  the host the job believes it runs on: a torch build, its GPUs, their card (one description,
                   read by both sides; the build's facts are data, app/harness/machine/machines/builds/)
    Report         the facts a graded job reports (app/harness/grade.py, report.py for several ranks); the
                   grader (app/grading/) turns them into a verdict

On a host without a GPU the harness simulates this host; on a host where the job really has CUDA, the harness
simulates nothing and this description is ignored. Both job modes honour it: `course grade` and the site's
grading, and plain `course run` jobs.

The default for hosts without a GPU is decided HERE, once: `DEFAULT_HOST`, the `h100` machine profile (a CUDA
build of torch with one H100). The machines are data, one profile each (app/harness/machine/machines/):
`machine_host(id)` turns one into a host; `job_host(settings, ...)` does so for a job, with the machine an
exercise's `machine:`, `course run --machine ID` or COURSE_SIM_MACHINE names. An exercise asks for more GPUs
with `gpus:` in its exercise.yaml; `course run --gpus N --build ...` picks any host. Lesson code blocks
(app/content/runnable.py) never run in the sandbox: they run on the plain CPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, NotRequired, TypedDict

from app.harness.machine import machines

# the torch builds there are profiles of (app/harness/machine/machines/builds/): "cuda", "macos-arm64", "cpu"
BUILDS: tuple[str, ...] = tuple(machines.BUILDS)
GiB = 1 << 30
# GPUs one simulated host may have; a DGX node has 8, and a learner's program rarely asks for more
MAX_GPUS = 8
# simulated machines in one job of several ranks (torchrun --nnodes); all their ranks together are at most
# MAX_GPUS, since every rank is a whole torch process under the job's one set of limits
MAX_NODES = 4
MiB = 1 << 20
# bytes; a simulated GPU tensor this large is kept without values (shape, dtype, memory only): the sandbox's
# 1 GiB cannot back a real card's tensors. COURSE_SIM_DATALESS_TENSOR_BYTES changes it
DATALESS_TENSOR_BYTES = 16 * MiB
# bytes; once the simulated GPUs' tensors with values hold this much host memory, new ones are kept without
# values too (a sixteenth of the default 1 GiB job: gradients and optimizer states of those tensors
# take four times as much again, and torch itself about 250 MiB).
# COURSE_SIM_DEVICE_DATA_BYTES changes it
DEVICE_DATA_BYTES = 64 * MiB


@dataclass(frozen=True)
class SimulatedHost:
    """A torch build and the devices it finds: what the learner's program will find (both sides read this)."""

    build: str = "cuda"  # a build profile's id (BUILDS): its facts say what torch was compiled for
    gpus: int = 1  # CUDA GPUs present (0 on a CUDA build: a machine without an NVIDIA driver)
    gpu_name: str = "NVIDIA H100 80GB HBM3"
    gpu_memory_bytes: int = 80 * GiB  # what mem_get_info()/get_device_properties() report as the card's total
    capability: tuple[int, int] = (9, 0)  # compute capability (9.0: Hopper; >= 8.0 supports bfloat16)
    multiprocessors: int = 132
    cuda_version: str = machines.BUILDS["cuda"].cuda_version  # torch.version.cuda of the simulated wheel
    mps: bool = False  # a build with MPS: the Mac's GPU answers torch.backends.mps.is_available()
    # the machine profile this host was made from (app/harness/machine/machines/<id>.json)
    machine: str = machines.DEFAULT
    dataless_tensor_bytes: int = DATALESS_TENSOR_BYTES  # see DATALESS_TENSOR_BYTES
    device_data_bytes: int = DEVICE_DATA_BYTES  # see DEVICE_DATA_BYTES
    # the simulated clock's figures (machines.clock_figures: peak FLOPS per dtype, bandwidth, link rates); None:
    # no modeled clock, the program reads real time
    clock: dict | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.build not in machines.BUILDS:
            raise ValueError(f"unknown torch build {self.build!r}; one of {', '.join(BUILDS)}")
        if not 0 <= self.gpus <= MAX_GPUS:
            raise ValueError(f"gpus must be between 0 and {MAX_GPUS}, not {self.gpus}")
        if not self.cuda and self.gpus:
            raise ValueError(f"a {self.build} build of torch sees no CUDA GPUs; use a build with CUDA "
                             f"({', '.join(b for b in BUILDS if machines.BUILDS[b].cuda)}) for {self.gpus}")
        if self.mps and not self.mps_built:
            raise ValueError(f"only a build with MPS ({', '.join(b for b in BUILDS if machines.BUILDS[b].mps_built)})"
                             " has MPS")

    # --- the build's facts (data: app/harness/machine/machines/builds/<build>.json) ---------------------------
    @property
    def accelerator(self) -> str | None:
        """The device type this build was compiled for ("cuda", "mps"), or None for a CPU-only build."""
        return machines.BUILDS[self.build].accelerator

    @property
    def cuda(self) -> bool:
        """Compiled with CUDA: CUDA's runtime, CUDA_VISIBLE_DEVICES, pinned memory, NCCL."""
        return machines.BUILDS[self.build].cuda

    @property
    def mps_built(self) -> bool:
        """torch.backends.mps.is_built()."""
        return machines.BUILDS[self.build].mps_built

    @property
    def simulated(self) -> bool:
        """True when the harness must pretend something the installed CPU-only torch is not."""
        return bool(self.accelerator or self.cuda or self.mps_built)

    def devices_present(self) -> int:
        """Devices of this build's accelerator in the machine (before CUDA_VISIBLE_DEVICES hides any)."""
        if self.cuda:
            return self.gpus
        return int(self.mps) if self.mps_built else 0

    # --- crossing the boundary ------------------------------------------------------------------------------
    def payload(self) -> dict:
        """The JSON-ready form the harness receives in the job's payload: a new dict each call, equal to
        `dataclasses.asdict`'s with the capability as a list. Built field by field: asdict's walk (a deepcopy of
        every value, the clock's dicts entered one by one) was 25 us of every job's submission on the web
        server's event loop, this 5 (bench/README.md, "The runner's work per job on the event loop")."""
        data = {name: _plain_copy(getattr(self, name)) for name in _HOST_FIELDS}
        data["capability"] = list(self.capability)
        return data

    @classmethod
    def from_payload(cls, data: dict | None) -> "SimulatedHost":
        """Rebuild a host from payload()'s output; None (a payload without a host) is the plain CPU."""
        if not data:
            return PLAIN_CPU
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        if "capability" in fields:
            fields["capability"] = tuple(fields["capability"])
        return cls(**fields)

    def describe(self) -> str:
        """One line for logs and the CLI: "CUDA build, 2 x NVIDIA H100 80GB HBM3 (79.19 GiB)"."""
        if self.cuda:
            cards = (f"{self.gpus} x {self.gpu_name} ({self.gpu_memory_bytes / GiB:.2f} GiB)" if self.gpus
                     else "no GPU")
            return f"CUDA {self.cuda_version} build, {cards}"
        if self.mps_built:
            return f"macOS arm64 build, MPS {'available' if self.mps else 'unavailable'}"
        return "CPU-only build"

    def with_gpus(self, gpus: int) -> "SimulatedHost":
        """The same host with another number of GPUs."""
        return replace(self, gpus=gpus)

    def on_build(self, build: str, *, gpus: int | None = None, mps: bool | None = None) -> "SimulatedHost":
        """The same machine on another torch build: CUDA GPUs only where it has CUDA, MPS (by default) where it
        has MPS."""
        facts = machines.BUILDS[build] if build in machines.BUILDS else None
        has_cuda, has_mps = (facts.cuda, facts.mps_built) if facts else (False, False)
        if has_cuda:
            return replace(self, build=build, gpus=self.gpus if gpus is None else gpus,
                           mps=False if mps is None else mps)
        return replace(self, build=build, gpus=gpus or 0, mps=has_mps if mps is None else mps)


_HOST_FIELDS = tuple(f.name for f in fields(SimulatedHost))


def _plain_copy(value):
    """A copy of a host field's value as `dataclasses.asdict` makes it: dicts, lists and tuples copied all the way
    down (a caller may change what payload() returns), anything else (numbers, strings, None) as it is."""
    if isinstance(value, dict):
        return {k: _plain_copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain_copy(v) for v in value)
    return value


# No simulation at all: torch as installed here (a CPU-only build). Benchmarks use it as their baseline.
PLAIN_CPU = SimulatedHost(build="cpu", gpus=0)


# (machine id, gpus, folder) -> (the profile, its host): a host is a frozen description of its profile, built once
# per profile rather than once per job (two constructions and the clock's figures, 8 us on every graded
# submission's way to the sandbox); the profile's identity says it is still the one on disk (machines.load_all
# reads an extra folder again when its files change)
_MACHINE_HOSTS: dict[tuple, tuple[object, SimulatedHost]] = {}
_JOB_HOSTS: dict[tuple, tuple[SimulatedHost, SimulatedHost]] = {}  # job_host's, the same way
_MACHINE_HOSTS_MAX = 256  # distinct keys kept; past it the cache starts again (tests make throw-away folders)


def machine_host(machine_id: str = machines.DEFAULT, *, gpus: int | None = None,
                 folder=None) -> SimulatedHost:
    """The host a machine profile describes (`gpus` replaces its GPU count); MachineError for an unknown id."""
    m = machines.get(machine_id, folder)
    key = (machine_id, gpus, str(folder) if folder else None)
    cached = _MACHINE_HOSTS.get(key)
    if cached is not None and cached[0] is m:
        return cached[1]
    host = _profile_host(m, gpus)
    if len(_MACHINE_HOSTS) >= _MACHINE_HOSTS_MAX:
        _MACHINE_HOSTS.clear()
    _MACHINE_HOSTS[key] = (m, host)
    return host


def _profile_host(m, gpus: int | None) -> SimulatedHost:
    given = dict(build=m.build, gpus=m.gpus if gpus is None else gpus, mps=m.mps, machine=m.id)
    if machines.BUILDS[m.build].cuda_version:
        given["cuda_version"] = machines.BUILDS[m.build].cuda_version
    # the card's figures where the profile has them (a CPU-only machine has none: the fields keep no meaning)
    card = {"gpu_name": ("name", str), "gpu_memory_bytes": ("total_memory", int), "capability": ("capability", tuple),
            "multiprocessors": ("multiprocessors", int)}
    given.update({field: kind(m.value(figure)) for field, (figure, kind) in card.items()
                   if m.value(figure) not in (None, "")})
    given["clock"] = machines.clock_figures(m) if machines.BUILDS[m.build].accelerator else None
    return SimulatedHost(**given)


# The simulated host of every job on a host without a GPU, unless an exercise or `course run` asks otherwise.
DEFAULT_HOST = machine_host(machines.DEFAULT)


def elsewhere_machine(machine_id: str) -> dict:
    """One other machine a check runs the program on: {"id", "title", "host"} (GradeSpec.elsewhere)."""
    return {"id": machine_id, "title": machines.get(machine_id).title, "host": machine_host(machine_id).payload()}


def host_for(*, build: str = "cuda", gpus: int | None = None, mps: bool | None = None,
             base: SimulatedHost = DEFAULT_HOST) -> SimulatedHost:
    """A host of the given build, otherwise like `base` (a build with MPS has it unless mps=False)."""
    return base.on_build(build, gpus=gpus, mps=mps)


def job_host(settings, *, machine: str | None = None, gpus: int | None = None,
             build: str | None = None) -> SimulatedHost:
    """The simulated host of one job: the machine named (else COURSE_SIM_MACHINE's), `gpus` GPUs, the data-less
    thresholds of the settings; `build` swaps the torch build as `course run --build` does."""
    folder = getattr(settings, "sim_machines_dir", None)
    base = machine_host(machine or getattr(settings, "sim_machine", machines.DEFAULT), folder=folder)
    thresholds = (getattr(settings, "sim_dataless_tensor_bytes", DATALESS_TENSOR_BYTES),
                  getattr(settings, "sim_device_data_bytes", DEVICE_DATA_BYTES))
    # the same host for the same profile's host (machine_host's, held here so its id stays its own) and arguments:
    # built once, not on every submission (5 us)
    key = (id(base), thresholds, gpus, build)
    cached = _JOB_HOSTS.get(key)
    if cached is not None and cached[0] is base:
        return cached[1]
    host = replace(base, dataless_tensor_bytes=thresholds[0], device_data_bytes=thresholds[1])
    if build is not None and build != host.build:
        host = host_for(build=build, gpus=gpus, base=host)
    elif gpus is not None:
        host = host.with_gpus(gpus)
    if len(_JOB_HOSTS) >= _MACHINE_HOSTS_MAX:
        _JOB_HOSTS.clear()
    _JOB_HOSTS[key] = (base, host)
    return host


def fits_ahead(payload: "JobPayload", host: dict | None) -> bool:
    """Whether a session built ahead for `host` (a SimulatedHost payload; app/harness/session.py ahead, in a
    waiting sandbox child) is exactly the one the job's harness would build: the same host, one process (no rank,
    no launcher's environment), and a host whose session does not depend on the learner's file name (a Mac
    watches the learner's `import torch` by it). The fork server asks before it hands a job to such a child
    (app/sandbox/pools.py); the child asks again."""
    if not host or payload.get("host") != host:
        return False
    built = SimulatedHost.from_payload(host)
    if not built.simulated or built.mps:
        return False
    return int(payload.get("nproc") or 1) == 1 and not payload.get("launcher") and not payload.get("rank")


# --- the job and its report --------------------------------------------------------------------------------


class GradeSpec(TypedDict):
    """What a graded job's harness needs of the exercise: its slug, its probe's source (None: no probe) and the
    other machines its program must also run on ({"id", "title", "host": a SimulatedHost payload}; elsewhere.py)."""

    exercise: str
    probe: str | None
    elsewhere: NotRequired[list[dict]]


class JobPayload(TypedDict, total=False):
    """The job as the harness receives it (app/runner/base.py's Job.payload() writes it; never the job's key)."""

    code: str
    filename: str  # the name tracebacks show
    mode: Literal["run", "grade"]
    grade: GradeSpec | None  # grading mode: the harness takes it out before the learner's code runs
    host: dict | None  # SimulatedHost.payload(); None: the plain CPU
    nproc: int  # rank processes in all (1: one process)
    nnodes: int  # simulated machines the ranks are spread over
    launcher: str | None  # None (torchrun), "accelerate", "accelerate-cpu" (app/harness/launchers.py)
    trace: bool  # a plain run reports the simulated clock's Chrome trace (`course run --trace`)
    loopback: bool  # one process with its own loopback (sockets to itself), as a job of several ranks has


class ExceptionFacts(TypedDict):
    """An exception the learner's code raised (grade.describe_exception)."""

    type: str
    message: str
    lines: list[int]  # the learner's lines in its traceback
    line: int | None  # the last of them
    traceback: str  # as Python prints it, from the learner's file on, without the harness's frames


class Outcome(TypedDict, total=False):
    """How the learner's file ended."""

    finished: bool
    exit_code: int | None
    exception: ExceptionFacts | None
    system_exit: bool  # it called sys.exit() ...
    exit_line: int | None  # ... on this line
    signal: int | None  # a rank killed by a signal (several ranks)
    duration_ms: float


class Report(TypedDict, total=False):
    """The ONE report a graded job writes (app/harness/grade.py; report.py merges the ranks'): facts only.

    The grader (app/grading/grader.py: evaluate, facts.py, ranks.py, placement_map.py) decides every check from it.
    """

    nonce: str | None  # the job's key, asked for only after the learner's code ran (channel.py)
    exercise: str | None
    simulated: bool  # the host was simulated (no real GPU)
    device: str  # the device line the verdict shows
    accelerator: str  # the accelerator's device label ("cuda:0", "mps:0"), "cpu" when none
    host: dict | None  # the payload's host
    outcome: Outcome
    probe: Any  # what the exercise's probe returned
    probe_error: str | None  # the probe's own traceback: a grader error, not the learner's
    tampered: list[str]  # torch functions the learner's code replaced
    trace: dict  # the tracer's facts: events, counts, ops, lines, losses, steps (tracing/placement.py)
    dist: dict | None  # torch.distributed's facts (machine/distributed.py)
    ranks: list[dict]  # several ranks: each rank's report with rank, local_rank, node, exit_code, signal ...
    launch: dict  # several ranks: the launcher's facts (first_failure)
    elsewhere: list[dict]  # how the program ended on the other machines a check names (elsewhere.py)
    timeline: "Timeline | None"  # the simulated clock's figures (machine/clock.py); None without one


class TimelineLine(TypedDict):
    """What one learner line cost on the modeled clock."""

    line: int
    ms: float  # device time of its kernels and copies
    wait_ms: float  # the host waiting there for the GPU (a sync, a blocking copy)


class TimelineRow(TypedDict):
    """One row of the modeled timeline: the host, a stream or a copy engine."""

    name: str  # "host", "cuda:0 stream default", "cuda:0 copy engine"
    ms: float  # its spans' total: the host's waiting for the GPU, a stream's kernels, a copy engine's copies
    spans: int
    marks: int  # instants: the host's syncs, events recorded on a stream


class RankTimeline(TypedDict, total=False):
    """One rank's totals in a job of several ranks."""

    rank: int
    node: int | None  # its simulated machine (several machines), else None
    modeled_ms: float
    gpu_busy_ms: float
    copy_ms: float
    comm_ms: float
    host_wait_ms: float
    gpu_idle_ms: float
    syncs: int
    kernels: int
    collectives: int
    step_ms: float | None


class Timeline(TypedDict, total=False):
    """Where a simulated job's time went, on the modeled clock (app/harness/machine/clock.py): ms and counts."""

    machine: str  # the machine profile the times are modeled for
    modeled_ms: float  # the program's modeled run: the later of the host's time and the last stream's end
    gpu_busy_ms: float  # kernels' modeled time, all streams
    copy_ms: float  # copies' modeled time (host<->device, device<->device)
    comm_ms: float  # collectives' modeled time on NCCL's stream (all_reduce, DDP's gradient buckets, ...)
    collectives: int  # collectives run (each DDP bucket one)
    host_wait_ms: float  # the host waiting on the GPU at syncs and blocking copies
    gpu_idle_ms: float  # a stream idle, waiting for the host to launch its next work
    syncs: int  # times the host waited for the GPU
    kernels: int  # kernels launched
    step_ms: float | None  # the median modeled time between two optimizer steps; None with fewer than two
    lines: list[TimelineLine]  # per learner line, its modeled device time
    calibrated_on: str  # the real GPU whose recordings set the launch and sync costs (clock.CALIBRATED_ON)
    rows: list[TimelineRow]  # the host, then each stream and copy engine (machine/chrome_trace.py: drawing)
    # the first grade.VERDICT_EVENTS events: [row index, start us, duration us, kind, name, learner line or None]
    events: list[list]
    events_total: int  # events the clock kept (up to clock.TRACE_EVENTS_KEPT)
    # several ranks (report.py): every rank's totals; the figures above are rank 0's, modeled_ms the latest rank's
    ranks: list[RankTimeline]
