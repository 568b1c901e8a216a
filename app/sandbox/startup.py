"""What the fork server does once at start-up: warm torch up, describe itself, and word its refusal."""

from __future__ import annotations

import ctypes
import gc
import linecache
import os
import sys

NEEDS_ROOT = (
    "the sandbox needs root or user namespaces to isolate learner code (namespaces, cgroups, a per-slot uid) and "
    "has neither here; run the app as root (e.g. in its container), or set COURSE_SANDBOX_UNSAFE_DEV=1 on a "
    "development machine to run code WITHOUT isolation"
)


# the fork server's staging directory (the mount point of each child's root) in the temp dir: prefix, pid, random
STAGING_PREFIX = "course-sbx-root-"


def log(message: str) -> None:
    """Write one line to the fork server's stderr, which the runner passes on to its log."""
    print(f"sandbox-server[{os.getpid()}]: {message}", file=sys.stderr, flush=True)


def warm_up(gpu: bool = False) -> dict:
    """Import torch, keep it single-threaded and run a small training loop so lazy work is done before forking.

    Every job is a fork of this process, so whatever torch (and Python) does on first use and is done here is
    not redone by each job: lazy imports (the optimizer pulls in torch._dynamo, ~0.8 s), the DataLoader's
    machinery, kernels' first dispatch. The loop mirrors what the exercises do.

    gpu: this server forks GPU slots' children, so the loop stops before backward(). On a CUDA build the autograd
    engine's first backward, even of CPU tensors, counts the CUDA devices (cudaGetDeviceCount), which initialises
    the CUDA driver in this process; every child forked after that fails its first CUDA call with "CUDA error:
    initialization error" (seen on an H200 with torch 2.11.0+cu130, 2026-12-04, scripts/gpu-check). The GPU
    children do the whole loop on their own device (app/sandbox/warm.py) before they take a job.
    """
    import torch

    torch.set_num_threads(1)  # a child forked after a multi-threaded OpenMP region hangs in its first matmul
    training_loop(backward=not gpu)
    # torch.manual_seed on a build whose CUDA is not initialised (CPU-only, or a simulated GPU before its first use)
    # queues CUDA's, XPU's and MTIA's seeding with traceback.format_stack(), which reads the source of every file on
    # the stack through linecache: ~4 ms of a job's CPU the first time, in nearly every learner's program. Read
    # here, those files cost each job a stat() apiece (linecache.checkcache).
    for name in ("torch.random", "torch.cuda.random", "torch.cuda", "torch.xpu.random", "torch.xpu", "torch.mtia",
                 "torch._compile", "torch._dynamo.eval_frame"):
        module = sys.modules.get(name)
        if getattr(module, "__file__", None):
            linecache.getlines(module.__file__)
    return {"torch": torch.__version__}


def training_loop(backward: bool = True) -> None:
    """What the exercises do, small: a DataLoader, a model, SGD then Adam, a loss (backward and step: `backward`)."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    x = torch.linspace(-1, 1, 16).unsqueeze(1)
    loader = DataLoader(TensorDataset(x, 3 * x - 1), batch_size=8, shuffle=True)
    model = torch.nn.Sequential(torch.nn.Linear(1, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1)).to("cpu")
    for opt in (torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.Adam(model.parameters(), lr=0.01)):
        for xb, yb in loader:
            xb, yb = xb.to("cpu"), yb.to("cpu")
            loss = torch.nn.functional.mse_loss(model(xb), yb)
            opt.zero_grad()
            if backward:
                loss.backward()
                opt.step()
        loss.item()


def warm_pages() -> None:
    """In a waiting child, before its job: run the warm-up's training loop once more, torch's random state kept.

    The child shares the fork server's memory until it writes to it: the first write to each page (an object's
    reference count is enough) faults and copies that page, and torch's code writes to the same few hundred pages
    in nearly every job. Running the loop here takes those faults while the child waits: ~700 fewer in a warm
    job of `bench.sandbox`'s snippet (990 -> 275), 2.3 ms less of its CPU, for ~3 MB more of the idle child's
    own memory (2026-12-04, ru_minflt and time.process_time in forked copies of the server's state). Nothing of
    the loop remains but memory: the random state (the DataLoader's shuffle, the model's initial weights) is put
    back, and it warns of nothing, starts no thread and no process. With a CUDA build of torch the loop stops
    before backward(), as the server's own warm-up does on a GPU host (warm_up says why)."""
    import torch

    state = torch.get_rng_state()
    try:
        training_loop(backward=torch.version.cuda is None)
    finally:
        torch.set_rng_state(state)


def project_sources(root: str) -> tuple[str, ...]:
    """The files of the modules loaded now from under `root` (the app package): the fork server's list, made once
    before its first fork, for forget_hidden_sources (a walk of sys.modules' ~2,000 entries costs ~1 ms)."""
    paths = {getattr(module, "__file__", None) for module in list(sys.modules.values())}
    return tuple(sorted(p for p in paths if isinstance(p, str) and p.startswith(root)))


def forget_hidden_sources(paths) -> int:
    """In a job's process once isolated: linecache learns that those of `paths` (project_sources: the fork server's
    and the harness's modules, whose frames lie below the learner's) it cannot read have no source here; return
    how many it learnt.

    The job's root hides the project's files, so every line of their frames in a formatted stack is empty, but each
    lookup found that out again: a failed stat(), the module's loader asked for the source and its ImportError, per
    frame, per line. torch.manual_seed formats the stack three times (CUDA's, XPU's and MTIA's queued seeding,
    warm_up says why), through a dozen such frames: in a real sandbox job it cost 1.31 ms of CPU, 0.94 ms with
    these entries (thread_time inside the job, medians of 12 jobs, 2026-12-05), in nearly every learner's program.
    An entry with no modification time is one linecache.checkcache never stats, and its empty lines are what the
    lookup found (a lazy entry's loader cannot read the file either); a file the job can read, or one read
    already, is left as it is."""
    hidden = 0
    for path in paths:
        if len(linecache.cache.get(path, ())) > 1:
            continue  # read already (a lazy entry only asks the module's loader)
        try:
            os.stat(path)
        except OSError:
            linecache.cache[path] = (0, None, [], path)
            hidden += 1
    return hidden


def freeze_heap() -> None:
    """Move every object that exists now out of the garbage collector's sight, just before forking jobs.

    A collection in a job would otherwise walk all of torch's objects inherited from this process, and writing
    their GC headers copies (page by page) memory the job shares with the fork server.
    """
    gc.collect()
    gc.freeze()


# madvise(2)'s MADV_COLLAPSE (Linux 6.1; include/uapi/asm-generic/mman-common.h): back a range with transparent huge
# pages now, whatever /sys/kernel/mm/transparent_hugepage/enabled says short of "never"
MADV_COLLAPSE = 25
# bytes; a PMD-mapped huge page on x86-64 and arm64 with 4 KiB pages
# (/sys/kernel/mm/transparent_hugepage/hpage_pmd_size)
HUGE_PAGE = 2 << 20


def huge_pages(maps_path: str = "/proc/self/maps") -> int:
    """Back the warm heap with 2 MiB pages before forking jobs from it; return the bytes collapsed (0: not here).

    A fork copies one page-table entry, and takes one reference, per 4 KiB page of private memory, and the
    child's exit drops them again: with torch's ~220 MB anonymous heap that is ~57,000 entries, about 12 ms of
    CPU in the parent and 15 ms at the child's exit on the development machine, paid by every fork of a job
    (the zygote's child, an outer child's job process in user-namespace mode, and a graded job's copy elsewhere,
    app/harness/elsewhere.py). A 2 MiB page is one entry: the same fork measured 1.1 ms and 2.2 ms. A job that
    writes to a shared huge page splits only its own mapping of it and copies the 4 KiB it wrote, as before.
    Anonymous read-write ranges only (the heap and torch's arenas); a kernel without MADV_COLLAPSE, or with huge
    pages off, refuses and nothing changes."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        with open(maps_path) as f:
            lines = f.read().splitlines()
    except OSError:  # not glibc, or no /proc: forks cost what they cost
        return 0
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    collapsed = 0
    for line in lines:
        parts = line.split()
        name = parts[5] if len(parts) > 5 else ""
        if len(parts) < 5 or parts[1] != "rw-p" or (name and name != "[heap]"):
            continue
        low, high = (int(x, 16) for x in parts[0].split("-"))
        start, end = (low + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1), high & ~(HUGE_PAGE - 1)
        if end - start >= HUGE_PAGE and libc.madvise(start, end - start, MADV_COLLAPSE) == 0:
            collapsed += end - start
    return collapsed


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
        # cores all jobs together may use (COURSE_SANDBOX_CPU_RESERVE less than the host's); None: no cap
        "jobs_cpu_cores": cgroups.jobs_cores() if cgroups else None,
        # whether a waking page request takes a core from a job at once (COURSE_SANDBOX_JOBS_IDLE)
        "jobs_cpu_idle": bool(cgroups and cgroups.jobs_idle),
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


def remove_stale_staging(tmpdir: str) -> list[str]:
    """Remove the staging directories of fork servers that were killed (their pid, in the name, is gone).

    A killed server cannot clean up after itself. Its staging directory is empty in this mount namespace (each
    child mounts its root there in its own), so `rmdir` is enough, and it refuses anything that is not empty or
    is a mount point. A directory whose pid is alive belongs to a running server and is left alone."""
    removed = []
    try:
        names = [n for n in os.listdir(tmpdir) if n.startswith(STAGING_PREFIX)]
    except OSError:
        return removed
    for name in names:
        pid, dash, _ = name[len(STAGING_PREFIX):].partition("-")
        if dash and pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            try:
                os.rmdir(os.path.join(tmpdir, name))
                removed.append(name)
            except OSError:
                pass
    return removed
