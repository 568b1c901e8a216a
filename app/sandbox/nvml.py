"""NVML (nvidia-ml-py), the only way this project asks about GPUs: never CUDA, which would poison fork.

Three callers, none of which forks jobs: the runner's start-up (which GPUs exist, `gpus.resolve`), `course
doctor`, and the GPU monitor, a small process the fork server starts (`python -m app.sandbox.nvml`) so that the
server itself never loads the NVML library: a library state inherited by a forked child that later creates its
own CUDA context is exactly what must not happen.

The monitor reads one GPU UUID per line on stdin and answers one JSON line on stdout: `{"pids": [...]}` (every
process with a context on that GPU, compute and graphics), or `{"error": "..."}`.
"""

from __future__ import annotations

import json
import sys

# NVML's "no such thing" codes, which mean "this GPU has no MIG device at that index", not a failure
_NOT_FOUND = ("NVMLError_NotFound", "NVMLError_NotSupported", "NVMLError_InvalidArgument")


class NvmlUnavailable(RuntimeError):
    """NVML cannot be used here (no driver, no library); the message says why in a few words."""


def load(nvml=None):
    """Return an initialised NVML module (pynvml), or raise NvmlUnavailable saying why."""
    try:
        nvml = nvml or __import__("pynvml")
    except ImportError as exc:  # nvidia-ml-py is a dependency; a broken install says so
        raise NvmlUnavailable(f"nvidia-ml-py is not installed ({exc})") from None
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        raise NvmlUnavailable(f"NVML could not start: {exc}") from None
    return nvml


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _mig_devices(nvml, parent) -> list:
    try:
        current, _pending = nvml.nvmlDeviceGetMigMode(parent)
    except nvml.NVMLError:
        return []
    if current != 1:
        return []
    found = []
    for j in range(nvml.nvmlDeviceGetMaxMigDeviceCount(parent)):
        try:
            found.append((j, nvml.nvmlDeviceGetMigDeviceHandleByIndex(parent, j)))
        except nvml.NVMLError as exc:
            if type(exc).__name__ not in _NOT_FOUND:
                raise
    return found


def list_gpus(nvml) -> list[dict]:
    """Every GPU NVML reports, or its MIG devices instead where MIG is on: id, uuid, name, minor, memory, MIG ids."""
    gpus = []
    for i in range(nvml.nvmlDeviceGetCount()):
        handle = nvml.nvmlDeviceGetHandleByIndex(i)
        base = {"id": str(i), "minor": nvml.nvmlDeviceGetMinorNumber(handle), "name": _text(
            nvml.nvmlDeviceGetName(handle)), "uuid": _text(nvml.nvmlDeviceGetUUID(handle)),
                "memory_bytes": int(nvml.nvmlDeviceGetMemoryInfo(handle).total), "mig": None}
        migs = _mig_devices(nvml, handle)
        if not migs:
            gpus.append(base)
        for j, mig in migs:
            gpus.append({**base, "id": f"{i}:{j}", "uuid": _text(nvml.nvmlDeviceGetUUID(mig)),
                         "name": _text(nvml.nvmlDeviceGetName(mig)),
                         "memory_bytes": int(nvml.nvmlDeviceGetMemoryInfo(mig).total),
                         "mig": {"gi": nvml.nvmlDeviceGetGpuInstanceId(mig),
                                 "ci": nvml.nvmlDeviceGetComputeInstanceId(mig)}})
    return gpus


def driver_version(nvml) -> str:
    """Return the kernel driver's version, e.g. '580.159.03'."""
    return _text(nvml.nvmlSystemGetDriverVersion())


def running_pids(nvml, uuid: str) -> list[int]:
    """Return the pids of every process holding a context on the GPU (or MIG device) with this UUID."""
    handle = nvml.nvmlDeviceGetHandleByUUID(uuid.encode() if isinstance(uuid, str) else uuid)
    pids = set()
    for query in (nvml.nvmlDeviceGetComputeRunningProcesses, nvml.nvmlDeviceGetGraphicsRunningProcesses):
        pids.update(int(p.pid) for p in query(handle))
    return sorted(pids)


def answer(nvml, line: str) -> dict:
    """Answer one monitor request (a GPU UUID) with its running pids, or the error."""
    try:
        return {"pids": running_pids(nvml, line.strip())}
    except Exception as exc:  # noqa: BLE001 - the server keeps the slot out and retries; it needs the reason
        return {"error": f"{type(exc).__name__}: {exc}"}


def monitor(stdin=sys.stdin, stdout=sys.stdout, nvml=None) -> int:
    """Serve running-pid questions until stdin closes; exit 1 at once if NVML cannot start."""
    try:
        nvml = load(nvml)
    except NvmlUnavailable as exc:
        print(json.dumps({"error": str(exc)}), file=stdout, flush=True)
        return 1
    for line in stdin:
        print(json.dumps(answer(nvml, line)), file=stdout, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(monitor())
