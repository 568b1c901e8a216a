"""What this host offers the sandbox, asked from outside any job: the user, user namespaces, CUDA, GPUs."""

from __future__ import annotations

import os

from app.sandbox import gpus, isolation, nvml


def facts() -> dict:
    """Return who this process runs as and whether user namespaces can be created."""
    return {"uid": os.getuid(), "user_namespaces": isolation.userns_available()}


def cuda_status() -> str:
    """Say whether CUDA is usable here, asking NVML only (this process never forks jobs, but stays cautious)."""
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    try:
        import torch

        if torch.cuda.is_available():
            return f"available ({torch.cuda.device_count()} device(s))"
        return "not available (no CUDA device or driver; torch " + torch.__version__ + ")"
    except Exception as exc:  # noqa: BLE001 - a broken torch install is reported, not raised
        return f"unknown ({type(exc).__name__}: {exc})"


def torch_build() -> str:
    """Say which torch build is installed, e.g. "2.13.0+cpu (CPU build)"; never initialises CUDA."""
    try:
        import torch
    except ImportError as exc:
        return f"not installed ({exc})"
    cuda = torch.version.cuda
    return f"{torch.__version__} ({'CUDA ' + cuda if cuda else 'CPU'} build)"


def _driver(dev_root: str) -> str:
    if dev_root != gpus.HOST_DEV:
        return f"none (test device tree {dev_root})"
    try:
        return nvml.driver_version(nvml.load())
    except nvml.NvmlUnavailable as exc:
        return f"none ({exc})"


def gpu_facts(gpu_devices: str | None, dev_root: str) -> dict:
    """Return the GPUs here, the driver, the torch build, and the slots COURSE_GPU_DEVICES asks for (or why not)."""
    facts: dict = {"torch_build": torch_build(), "driver": _driver(dev_root), "gpus": [], "slots": [],
                   "slots_error": None, "devices_cgroup": os.path.isdir("/sys/fs/cgroup/devices")}
    try:
        found, why_none = gpus.discover(dev_root)
        facts["gpus"] = [f"{g.id}: {g.name}" + (f" ({g.uuid})" if g.uuid else "") for g in found] or [why_none]
        facts["slots"] = [g.id for g in gpus.select(gpu_devices, found, why_none)]
    except gpus.GpuConfigError as exc:
        facts["slots_error"] = str(exc)
    return facts
