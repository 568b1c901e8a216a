"""What this host offers the sandbox, asked from outside any job: the user, user namespaces, CUDA."""

from __future__ import annotations

import os

from app.sandbox import isolation


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
