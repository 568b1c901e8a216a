"""GPU slots: which GPUs (or MIG devices) jobs may be given, and what a job given one needs from the host.

One slot per GPU named by COURSE_GPU_DEVICES (default: every one NVML reports; none on a CPU host). A slot
carries what the passthrough needs: the device nodes to bind into the job's /dev (and to allow in its devices
cgroup), the value of CUDA_VISIBLE_DEVICES, the name the verdict shows. Nothing here touches CUDA.

`dev_root` is where the device nodes are looked up: /dev on a real host. Tests point it at a temporary tree of
nodes made with mknod (NVIDIA's major numbers, no driver behind them); there is no NVML then, so the GPUs are
that tree's `nvidiaN` nodes.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from dataclasses import asdict, dataclass

from app.sandbox import nvml as nvmlmod

HOST_DEV = "/dev"
# the nodes every CUDA process opens besides its GPU's own /dev/nvidiaN (uvm-tools only where it exists)
SHARED_NODES = ("nvidiactl", "nvidia-uvm")
OPTIONAL_NODES = ("nvidia-uvm-tools",)
# where the driver says which /dev/nvidia-caps/nvidia-capN node opens a MIG GPU instance or compute instance
MIG_CAPS = "/proc/driver/nvidia/capabilities/gpu{minor}/mig/gi{gi}{ci}/access"
# the driver's user-space libraries, as the linker cache names them; everything else CUDA needs is in the venv
DRIVER_LIBRARY = re.compile(r"^lib(cuda|cudadebugger|nvidia-[a-z0-9-]+|nvcuvid|nvoptix)\.so(\.\d+)*$")


class GpuConfigError(ValueError):
    """GPU slots were asked for that this host cannot give; the message is one line saying why and what to do."""


@dataclass(frozen=True)
class GpuSlot:
    """One GPU (or MIG device) a job may be given, with what its passthrough needs."""

    id: str  # as COURSE_GPU_DEVICES names it: NVML's index ("0"), or "0:1" for MIG device 1 of GPU 0
    name: str  # what the verdict shows, e.g. "NVIDIA H200"
    uuid: str | None  # GPU-... or MIG-...; None for a test tree
    nodes: tuple[str, ...]  # device nodes under dev_root that the job gets, e.g. ("nvidia0", "nvidiactl", ...)
    memory_bytes: int | None = None

    @property
    def cuda_visible_devices(self) -> str:
        """The CUDA_VISIBLE_DEVICES value that makes this GPU cuda:0 (a UUID: indices differ between CUDA and NVML)."""
        return self.uuid or "0"

    def to_dict(self) -> dict:
        """Return a JSON-ready dict (the runner hands slots to the fork server this way)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "GpuSlot":
        """Rebuild a slot from to_dict()'s output."""
        return cls(**{**data, "nodes": tuple(data["nodes"])})


# ------------------------------------------------------------------------------------------------ discovery
def _mig_cap_nodes(minor: int, mig: dict) -> tuple[str, ...]:
    nodes = []
    for ci in ("", f"/ci{mig['ci']}"):
        path = MIG_CAPS.format(minor=minor, gi=mig["gi"], ci=ci)
        with open(path) as f:
            found = re.search(r"DeviceFileMinor:\s*(\d+)", f.read())
        if not found:
            raise GpuConfigError(f"{path} does not name a device minor; is this driver too old for MIG?")
        nodes.append(f"nvidia-caps/nvidia-cap{found.group(1)}")
    return tuple(nodes)


def _nodes(dev_root: str, minor: int, mig: dict | None) -> tuple[str, ...]:
    optional = tuple(n for n in OPTIONAL_NODES if os.path.exists(os.path.join(dev_root, n)))
    nodes = (f"nvidia{minor}", *SHARED_NODES, *optional) + (_mig_cap_nodes(minor, mig) if mig else ())
    for node in nodes:
        if not os.path.exists(os.path.join(dev_root, node)):
            hint = (" (load the module: `nvidia-modprobe -u -c=0`, or run one CUDA program on the host)"
                    if node == "nvidia-uvm" else "")
            raise GpuConfigError(f"GPU device node {os.path.join(dev_root, node)} is missing{hint}")
    return nodes


def _from_nvml(nvml) -> list[GpuSlot]:
    return [GpuSlot(id=g["id"], name=g["name"], uuid=g["uuid"], memory_bytes=g["memory_bytes"],
                    nodes=_nodes(HOST_DEV, g["minor"], g["mig"])) for g in nvmlmod.list_gpus(nvml)]


def _from_tree(dev_root: str) -> list[GpuSlot]:
    minors = sorted(int(m.group(1)) for n in os.listdir(dev_root) if (m := re.fullmatch(r"nvidia(\d+)", n)))
    return [GpuSlot(id=str(m), name=f"test GPU {m} (device tree {dev_root}, no driver)", uuid=None,
                    nodes=_nodes(dev_root, m, None)) for m in minors]


def discover(dev_root: str = HOST_DEV, nvml=None) -> tuple[list[GpuSlot], str]:
    """Return every GPU this host offers and, when there is none, why (e.g. "NVML could not start: ...")."""
    if dev_root != HOST_DEV:
        return _from_tree(dev_root), f"no nvidiaN node in {dev_root}"
    try:
        handle = nvmlmod.load(nvml)
    except nvmlmod.NvmlUnavailable as exc:
        return [], str(exc)
    found = _from_nvml(handle)
    return found, "" if found else "NVML reports no GPU"


def select(spec: str | None, found: list[GpuSlot], why_none: str) -> list[GpuSlot]:
    """Pick the slots COURSE_GPU_DEVICES names (unset: all found; "none": none); raise GpuConfigError if absent."""
    if spec is None or not spec.strip():
        return found
    if spec.strip().lower() == "none":
        return []
    by_key = {key: g for g in found for key in (g.id, g.uuid) if key}
    chosen = []
    for token in (t.strip() for t in spec.split(",") if t.strip()):
        if token not in by_key:
            have = ", ".join(g.id for g in found) or f"none ({why_none})"
            raise GpuConfigError(f"COURSE_GPU_DEVICES={spec} asks for GPU {token}, but this host has no such GPU "
                                 f"(GPUs here: {have}); unset it, set it to `none`, or name GPUs this host has")
        if by_key[token] not in chosen:
            chosen.append(by_key[token])
    return chosen


def resolve(spec: str | None, dev_root: str = HOST_DEV, nvml=None) -> list[GpuSlot]:
    """Return the GPU slots the settings ask for on this host; raise GpuConfigError (one line) when it cannot."""
    found, why_none = discover(dev_root, nvml)
    return select(spec, found, why_none)


# ------------------------------------------------------------------------------------------------ passthrough
def device_numbers(path: str) -> tuple[int, int]:
    """Return (major, minor) of a character device; raise GpuConfigError if path is not one."""
    st = os.stat(path)
    if not stat.S_ISCHR(st.st_mode):
        raise GpuConfigError(f"{path} is not a character device")
    return os.major(st.st_rdev), os.minor(st.st_rdev)


def driver_libraries(ldconfig_output: str | None = None) -> list[str]:
    """Return the NVIDIA driver's user-space libraries the linker cache knows (`ldconfig -p`), x86-64 only."""
    if ldconfig_output is None:
        try:
            ldconfig_output = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True,
                                             timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            return []
    found = []
    for line in ldconfig_output.splitlines():
        name, _, rest = line.strip().partition(" (")
        if DRIVER_LIBRARY.match(name) and "x86-64" in rest and "=>" in rest:
            found.append(rest.rsplit("=>", 1)[1].strip())
    return sorted(set(found))


# ------------------------------------------------------------------------------------------------ release
def slot_released(running: list[int], job_pids: set[int]) -> bool:
    """Whether a finished job has left its GPU: none of its processes is among those NVML lists on it."""
    return not set(running) & set(job_pids)
