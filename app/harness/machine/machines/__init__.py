"""Simulated machines as data: one JSON profile per machine in this folder, read by one loader.

A machine runs a torch build, itself a profile (builds/: the Linux CUDA wheel, the macOS arm64 wheel, the CPU-only
wheel): the device type it was compiled for, whether it has CUDA (and so CUDA_VISIBLE_DEVICES, pinned memory,
NCCL), whether it has MPS, the CUDA version it reports. The harness answers torch's build questions from these
facts, never from a build's name, so a machine on a known build is one file here and nothing else.

A profile is what a learner's program would find on that machine (the torch build, the card's name, memory as
torch reports it, compute capability, SM count, bfloat16 support) and what the clock needs (peak FLOPS per
dtype, memory bandwidth, the host link with its pinned and pageable rates, the GPU-to-GPU link, the network
between machines). Every figure is `{"value": ..., "source": "..."}`: where it was read (a datasheet, a published
`get_device_properties` repr) or how it was derived or modeled. `null` values say the machine has no such thing
or nobody published it.

Adding a machine is adding a file here (or in the folder COURSE_SIM_MACHINES_DIR names, for a test's throw-away
one); nothing else changes. The runner side (app/harness/contract.py) reads profiles and hands the harness the
figures it needs in the job's payload. The harness reads only builds/ (in the fork server, before any job), so
a probe may switch builds (ProbeAPI.scenario).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

FOLDER = Path(__file__).resolve().parent
DEFAULT = "h100"
# the facts of a build profile (builds/<id>.json), each {"value", "source"}
BUILD_FACTS = ("accelerator", "cuda", "mps_built", "cuda_version")
# the figures every profile has, each a {"value", "source"} pair (nested groups by dotted path)
FIGURES = ("name", "total_memory", "capability", "multiprocessors", "bf16",
           "peak_flops.fp64", "peak_flops.fp32", "peak_flops.tf32_tensor", "peak_flops.bf16_tensor",
           "peak_flops.fp16_tensor", "peak_flops.fp8_tensor", "memory_bandwidth",
           "host_link.kind", "host_link.bytes_per_s", "host_link.pinned_bytes_per_s",
           "host_link.pageable_bytes_per_s", "gpu_link.kind", "gpu_link.bytes_per_s")
# figures a profile may leave out (a throw-away card's); when present, each needs its source like the others
OPTIONAL_FIGURES = ("network.kind", "network.bytes_per_s")
# bytes/s between two machines where a profile names no network: 100 Gb/s, an assumption (docs/grading.md, "The
# simulated clock"), the same the course's profiles state with their source
DEFAULT_NETWORK_BYTES_PER_S = 12.5e9


class MachineError(ValueError):
    """A profile that cannot be used, or a machine id no profile has (the message names the file or the ids)."""


@dataclass(frozen=True)
class Build:
    """A torch build: what the wheel was compiled for (builds/<id>.json)."""

    id: str
    title: str
    accelerator: str | None  # the device type it was compiled for ("cuda", "mps"), None for a CPU-only wheel
    cuda: bool  # compiled with CUDA: CUDA's runtime, CUDA_VISIBLE_DEVICES, pinned memory, NCCL
    mps_built: bool  # torch.backends.mps.is_built()
    cuda_version: str | None  # torch.version.cuda


def _read_build(path: Path) -> Build:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("id") != path.stem:
            raise MachineError(f"{path}: id {data.get('id')!r} must be the file's name ({path.stem!r})")
        facts = {}
        for fact in BUILD_FACTS:
            leaf = data[fact]
            if not isinstance(leaf, dict) or "value" not in leaf or not str(leaf.get("source") or "").strip():
                raise MachineError(f"{path}: fact {fact!r} needs a value and a source")
            facts[fact] = leaf["value"]
        return Build(id=data["id"], title=str(data["title"]), **facts)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise MachineError(f"{path}: not a readable build profile ({type(exc).__name__}: {exc})") from None


# every build, read once (also in the fork server, before any job: the harness needs them to switch builds)
BUILDS: dict[str, Build] = {path.stem: _read_build(path) for path in sorted((FOLDER / "builds").glob("*.json"))}


@dataclass(frozen=True)
class Machine:
    """One machine profile."""

    id: str
    title: str
    build: str
    gpus: int  # GPUs the machine has unless `--gpus` asks for another count
    mps: bool
    path: Path
    data: dict

    def value(self, figure: str):
        """The value of a figure by dotted path ("peak_flops.bf16_tensor")."""
        return _leaf(self.data, figure)["value"]

    def source(self, figure: str) -> str:
        """Where a figure comes from."""
        return _leaf(self.data, figure)["source"]

    def summary(self) -> str:
        """One line for `course doctor`: "h100  NVIDIA H100 SXM5 80GB (the default): 79.19 GiB, sm_90"."""
        memory = self.value("total_memory")
        cap = self.value("capability")
        parts = [f"{memory / (1 << 30):.2f} GiB" if memory else None,
                 f"sm_{cap[0]}{cap[1]}" if cap else None, "bf16" if self.value("bf16") else None]
        extra = ", ".join(p for p in parts if p)
        return f"{self.id:<11} {self.title}" + (f": {extra}" if extra else "")


def _leaf(data: dict, figure: str) -> dict:
    node = data
    for key in figure.split("."):
        node = node[key]
    return node


def _check(data, path: Path) -> Machine:
    """Validate one profile's data; MachineError naming the file and the field."""
    if not isinstance(data, dict):
        raise MachineError(f"{path}: a machine profile is a JSON object")
    for key in ("id", "title", "build", "gpus"):
        if key not in data:
            raise MachineError(f"{path}: field {key!r} is missing")
    if data["id"] != path.stem:
        raise MachineError(f"{path}: id {data['id']!r} must be the file's name ({path.stem!r})")
    if data["build"] not in BUILDS:
        raise MachineError(f"{path}: build {data['build']!r} is none of {', '.join(BUILDS)} (builds/)")
    if not isinstance(data["gpus"], int) or data["gpus"] < 0:
        raise MachineError(f"{path}: gpus must be a whole number >= 0")
    for figure in FIGURES + OPTIONAL_FIGURES:
        try:
            leaf = _leaf(data, figure)
        except (KeyError, TypeError):
            if figure in OPTIONAL_FIGURES:
                continue
            raise MachineError(f"{path}: figure {figure!r} is missing") from None
        if not isinstance(leaf, dict) or "value" not in leaf or not str(leaf.get("source") or "").strip():
            raise MachineError(f"{path}: figure {figure!r} needs a value and a source "
                               '({"value": ..., "source": "where it was read"})')
    if BUILDS[data["build"]].cuda:
        for figure in ("name", "total_memory", "capability", "multiprocessors"):
            if _leaf(data, figure)["value"] in (None, ""):
                raise MachineError(f"{path}: a machine on a CUDA build needs a value for {figure!r}")
    return Machine(id=data["id"], title=data["title"], build=data["build"], gpus=data["gpus"],
                   mps=bool(data.get("mps", False)), path=path, data=data)


def read(path: Path) -> Machine:
    """Read and validate one profile file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MachineError(f"{path}: not a readable JSON profile ({exc})") from None
    return _check(data, path)


# the profiles as last read, by the files they were read from (path, mtime, size): a graded submission names its
# machine four times (the job's host, each also_runs_on machine, the verdict's words), and reading and checking
# every profile each time cost a few ms of the web server's CPU per verdict
_LOADED: dict[tuple, dict[str, Machine]] = {}
# this folder's profiles, read once per process: they ship with the code and, like it, do not change while a process
# lives (a changed profile takes a restart, as a changed module does). Only an `extra` folder (COURSE_SIM_MACHINES_DIR,
# a test's throw-away cards) is looked at again on each call: even the glob and a stat per file of that look cost
# 0.07 ms a call, four calls per graded submission in the web server's event loop.
_OWN: dict[str, Machine] | None = None


def load_all(extra: Path | str | None = None) -> dict[str, Machine]:
    """Every machine: this folder's profiles, then those of `extra` (a folder; its files may add machines)."""
    global _OWN
    if not extra:
        if _OWN is None:
            _OWN = _read_all([FOLDER], [sorted(FOLDER.glob("*.json"))])
        return dict(_OWN)
    folders = [FOLDER, Path(extra)]
    for folder in folders:
        if not folder.is_dir():
            raise MachineError(f"{folder}: the machine profiles folder does not exist")
    files = [sorted(folder.glob("*.json")) for folder in folders]
    try:
        key = tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for paths in files for p in paths)
    except OSError:  # a file went away meanwhile: read what is there, as before
        key = None
    if key is not None and key in _LOADED:
        return dict(_LOADED[key])
    machines = _read_all(folders, files)
    if key is not None:
        _LOADED.clear()  # only the files as they are now
        _LOADED[key] = machines
    return dict(machines)


def _read_all(folders: list[Path], files: list[list[Path]]) -> dict[str, Machine]:
    machines: dict[str, Machine] = {}
    for folder, paths in zip(folders, files):
        for path in paths:
            machine = read(path)
            if machine.id in machines and folder != FOLDER:
                raise MachineError(f"{path}: machine {machine.id!r} is already defined in {machines[machine.id].path}")
            machines[machine.id] = machine
    return machines


def get(machine_id: str, extra: Path | str | None = None) -> Machine:
    """The machine with this id; MachineError listing the known ids when there is none."""
    machines = load_all(extra)
    machine = machines.get(machine_id)
    if machine is None:
        raise MachineError(f"unknown machine {machine_id!r}; one of {', '.join(sorted(machines))}")
    return machine


def clock_figures(machine: "Machine") -> dict | None:
    """The figures the simulated clock needs (app/harness/machine/clock.py), from a profile; None when the machine
    has no GPU figures (a CPU-only machine: its program reads real time)."""
    fp32, bandwidth = machine.value("peak_flops.fp32"), machine.value("memory_bandwidth")
    if not fp32 or not bandwidth:
        return None
    peaks = {k: machine.value(f"peak_flops.{k}") for k in ("fp64", "fp32", "tf32_tensor", "bf16_tensor",
                                                            "fp16_tensor", "fp8_tensor")}
    return {"machine": machine.id,
            "peak_flops": {k: float(v) for k, v in peaks.items() if v},
            "memory_bandwidth": float(bandwidth),
            "pinned_bytes_per_s": float(machine.value("host_link.pinned_bytes_per_s") or bandwidth),
            "pageable_bytes_per_s": float(machine.value("host_link.pageable_bytes_per_s") or bandwidth),
            "gpu_link_bytes_per_s": float(machine.value("gpu_link.bytes_per_s") or 0) or None,
            # NVLink or PCIe between the GPUs of one machine: NCCL's latency per ring step differs
            "gpu_link_nvlink": "nvlink" in str(machine.value("gpu_link.kind") or "").lower(),
            "network_bytes_per_s": float(_optional(machine, "network.bytes_per_s") or DEFAULT_NETWORK_BYTES_PER_S)}


def _optional(machine: "Machine", figure: str):
    """An optional figure's value; None where the profile leaves it out."""
    try:
        return machine.value(figure)
    except (KeyError, TypeError):
        return None
