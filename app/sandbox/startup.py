"""What the fork server does once at start-up: warm torch up, describe itself, and word its refusal."""

from __future__ import annotations

import os

NEEDS_ROOT = (
    "the sandbox needs root or user namespaces to isolate learner code (namespaces, cgroups, a per-slot uid) and "
    "has neither here; run the app as root (e.g. in its container), or set COURSE_SANDBOX_UNSAFE_DEV=1 on a development "
    "machine to run code WITHOUT isolation"
)


def warm_up() -> dict:
    """Import torch, keep it single-threaded and run one training step so lazy imports are done before forking."""
    import torch

    torch.set_num_threads(1)  # a child forked after a multi-threaded OpenMP region hangs in its first matmul
    model = torch.nn.Linear(10, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)  # the optimizer pulls in torch._dynamo (~0.8 s)
    loss = torch.nn.functional.mse_loss(model(torch.randn(4, 10)), torch.randn(4, 2))
    loss.backward()
    opt.step()
    return {"torch": torch.__version__}


def describe(ctx, cgroups, config: dict, defaults, prefork: int, refuse: str | None, seccomp_why: str) -> dict:
    """Return the server's self-description (the `ready` message; `course doctor` prints it)."""
    iso = ctx.isolate
    has = lambda c: bool(cgroups and c in cgroups.controllers)  # noqa: E731
    return {
        "uid": os.getuid(), "isolate": iso, "unsafe_dev": bool(config.get("unsafe_dev")),
        "mode": "user namespace (no root)" if ctx.userns else "root" if iso else "NO ISOLATION",
        "layers": {
            "mount namespace + read-only root": iso, "pid namespace": iso, "network namespace": iso,
            "ipc namespace": iso, "uts namespace": iso, "cgroup namespace": iso,
            "private tmpfs (/tmp, /var/tmp, /dev/shm)": iso,
            "seccomp filter": ctx.seccomp is not None, "unprivileged uid per slot": iso and not ctx.userns,
            "rlimits": True, "cgroup memory": has("memory"), "cgroup pids": has("pids"), "cgroup cpu": has("cpu"),
        },
        "cgroup_version": cgroups.version if cgroups else "none",
        "cgroup_note": (cgroups.reason if cgroups else "not root: cgroups unavailable").strip(),
        "seccomp_note": seccomp_why,
        "root_dirs": ctx.plan.dirs,
        "uid_base": ctx.uid_base,
        "limits": defaults.to_dict(),
        "prefork": prefork,
        "refuse": refuse,
    }


def refused_result(message: str) -> dict:
    """Return the result of a job the server refuses to run."""
    return {"status": "error", "exit_code": None, "signal": None, "stdout": "", "stderr": "", "duration_ms": 0,
            "limit_hit": None, "report": None, "message": message}
