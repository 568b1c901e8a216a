"""What the hostile-program tests share: the programs, running one, and looking for survivors on the host."""

from __future__ import annotations

import os
import time
from pathlib import Path

PROGRAMS = Path(__file__).parent / "programs"
MiB = 1 << 20


def program(name: str, **subs) -> str:
    """Return a hostile program's source with its __PLACEHOLDERS__ filled in."""
    text = (PROGRAMS / f"{name}.py").read_text()
    for key, value in subs.items():
        text = text.replace(f"__{key}__", str(value))
    return text


def run(sandbox, name: str, subs: dict | None = None, **limits):
    return sandbox.run_code(program(name, **(subs or {})), filename=f"{name}.py", **limits)


def gone(name: str, within_s: float = 2.0) -> bool:
    """Return whether no process named name exists (killed processes may take a moment to be reaped)."""
    deadline = time.monotonic() + within_s
    while procs_named(name):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def procs_named(name: str) -> list[int]:
    """Return host pids whose command name is name (the programs set it with PR_SET_NAME)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if Path(f"/proc/{entry}/comm").read_text().strip() == name[:15]:
                    found.append(int(entry))
            except OSError:
                pass
    return found


def run_ranks(sandbox, name: str, subs: dict | None = None, **limits):
    """Run a hostile program as two ranks (`course run --nproc 2`), each on a simulated GPU of its own."""
    from app.harness.contract import DEFAULT_HOST
    from app.runner import Job

    lim = sandbox.runner.limits.__class__(**{**sandbox.runner.limits.to_dict(), **limits}) if limits else None
    return sandbox.run(Job(code=program(name, **(subs or {})), filename=f"{name}.py", nproc=2,
                           host=DEFAULT_HOST.with_gpus(2), limits=lim))


def run_loopback(sandbox, name: str, subs: dict | None = None, **limits):
    """Run a hostile program as one process with its own loopback (a lesson block marked `loopback`)."""
    from app.runner import Job

    lim = sandbox.runner.limits.__class__(**{**sandbox.runner.limits.to_dict(), **limits}) if limits else None
    return sandbox.run(Job(code=program(name, **(subs or {})), filename=f"{name}.py", loopback=True, limits=lim))
