"""The host a sandbox job believes it runs on: which torch build, how many GPUs, which card.

On a host without a GPU the harness simulates this host (app/harness/, "Devices: three modes" in
DESIGN.md); on a host where the job really has CUDA, the harness simulates nothing and this description is
ignored. Both job modes honour it: `course grade` and the site's grading, and plain `course run` jobs.

The default for hosts without a GPU is decided HERE, once: `DEFAULT_HOST`, the `h100` machine profile (a CUDA
build of torch with one H100). The machines are data, one profile each (app/harness/machine/machines/):
`machine_host(id)` turns one into a host; `job_host(settings, ...)` does so for a job, with the machine an
exercise's `machine:`, `course run --machine ID` or COURSE_SIM_MACHINE names. An exercise asks for more GPUs
with `gpus:` in its exercise.yaml; `course run --gpus N --build ...` picks any host. Lesson code blocks
(app/content/runnable.py) never run in the sandbox: they run on the plain CPU.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Literal

from app.harness.machine import machines

Build = Literal["cuda", "macos-arm64", "cpu"]
BUILDS: tuple[str, ...] = ("cuda", "macos-arm64", "cpu")
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
    """A torch build and the devices it finds (the harness reads the same fields, see harness/host.py)."""

    build: Build = "cuda"  # "cuda": Linux CUDA wheel; "macos-arm64": Apple silicon wheel; "cpu": CPU-only wheel
    gpus: int = 1  # CUDA GPUs present (0 on a CUDA build: a machine without an NVIDIA driver)
    gpu_name: str = "NVIDIA H100 80GB HBM3"
    gpu_memory_bytes: int = 80 * GiB  # what mem_get_info()/get_device_properties() report as the card's total
    capability: tuple[int, int] = (9, 0)  # compute capability (9.0: Hopper; >= 8.0 supports bfloat16)
    multiprocessors: int = 132
    cuda_version: str = "12.8"  # torch.version.cuda of the simulated wheel
    mps: bool = False  # macOS builds: the Mac's GPU answers torch.backends.mps.is_available()
    # the machine profile this host was made from (app/harness/machine/machines/<id>.json)
    machine: str = machines.DEFAULT
    dataless_tensor_bytes: int = DATALESS_TENSOR_BYTES  # see DATALESS_TENSOR_BYTES
    device_data_bytes: int = DEVICE_DATA_BYTES  # see DEVICE_DATA_BYTES

    def __post_init__(self) -> None:
        if self.build not in BUILDS:
            raise ValueError(f"unknown torch build {self.build!r}; one of {', '.join(BUILDS)}")
        if not 0 <= self.gpus <= MAX_GPUS:
            raise ValueError(f"gpus must be between 0 and {MAX_GPUS}, not {self.gpus}")
        if self.build != "cuda" and self.gpus:
            raise ValueError(f"a {self.build} build of torch sees no CUDA GPUs; use build 'cuda' for {self.gpus}")
        if self.mps and self.build != "macos-arm64":
            raise ValueError("only a macOS arm64 build of torch has MPS")

    def payload(self) -> dict:
        """The JSON-ready form the harness receives in the job's payload."""
        data = asdict(self)
        data["capability"] = list(self.capability)
        return data

    @classmethod
    def from_payload(cls, data: dict) -> "SimulatedHost":
        """Rebuild a host from payload()'s output."""
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        if "capability" in fields:
            fields["capability"] = tuple(fields["capability"])
        return cls(**fields)

    def describe(self) -> str:
        """One line for logs and the CLI: "CUDA build, 2 x NVIDIA H100 80GB HBM3 (79.19 GiB)"."""
        if self.build == "cuda":
            cards = (f"{self.gpus} x {self.gpu_name} ({self.gpu_memory_bytes / GiB:.2f} GiB)" if self.gpus
                     else "no GPU")
            return f"CUDA {self.cuda_version} build, {cards}"
        if self.build == "macos-arm64":
            return f"macOS arm64 build, MPS {'available' if self.mps else 'unavailable'}"
        return "CPU-only build"

    def with_gpus(self, gpus: int) -> "SimulatedHost":
        """The same host with another number of GPUs."""
        return replace(self, gpus=gpus)


def machine_host(machine_id: str = machines.DEFAULT, *, gpus: int | None = None,
                 folder=None) -> SimulatedHost:
    """The host a machine profile describes (`gpus` replaces its GPU count); MachineError for an unknown id."""
    m = machines.get(machine_id, folder)
    fields = dict(build=m.build, gpus=m.gpus if gpus is None else gpus, mps=m.mps, machine=m.id)
    if m.build == "cuda":
        fields.update(gpu_name=m.value("name"), gpu_memory_bytes=int(m.value("total_memory")),
                      capability=tuple(m.value("capability")), multiprocessors=int(m.value("multiprocessors")))
    elif m.build == "macos-arm64" and m.value("total_memory"):
        fields.update(gpu_name=m.value("name") or "", gpu_memory_bytes=int(m.value("total_memory")))
    return SimulatedHost(**fields)


# The simulated host of every job on a host without a GPU, unless an exercise or `course run` asks otherwise.
DEFAULT_HOST = machine_host(machines.DEFAULT)
# No simulation at all: torch as installed here (a CPU-only build). Benchmarks use it as their baseline.
PLAIN_CPU = SimulatedHost(build="cpu", gpus=0)


def host_for(*, build: str = "cuda", gpus: int | None = None, mps: bool | None = None,
             base: SimulatedHost = DEFAULT_HOST) -> SimulatedHost:
    """A host of the given build, otherwise like `base` (a macOS build has MPS unless mps=False)."""
    if build == "cuda":
        return base if gpus is None else base.with_gpus(gpus)
    return replace(base, build=build, gpus=gpus or 0,
                   mps=(build == "macos-arm64") if mps is None else mps)


def job_host(settings, *, machine: str | None = None, gpus: int | None = None,
             build: str | None = None) -> SimulatedHost:
    """The simulated host of one job: the machine named (else COURSE_SIM_MACHINE's), `gpus` GPUs, the data-less
    thresholds of the settings; `build` swaps the torch build as `course run --build` does."""
    folder = getattr(settings, "sim_machines_dir", None)
    host = machine_host(machine or getattr(settings, "sim_machine", machines.DEFAULT), folder=folder)
    host = replace(host, dataless_tensor_bytes=getattr(settings, "sim_dataless_tensor_bytes", DATALESS_TENSOR_BYTES),
                   device_data_bytes=getattr(settings, "sim_device_data_bytes", DEVICE_DATA_BYTES))
    if build is not None and build != host.build:
        return host_for(build=build, gpus=gpus, base=host)
    return host if gpus is None else host.with_gpus(gpus)
