"""Inside a warm-first child: warm up for its device (a CUDA context on its GPU, or the CPU), then isolate.

The spawn-then-isolate pool's children run this instead of isolating first. The namespaces were already
unshared while the child had one thread (child.py: unshare changes only the calling thread's namespaces, and
CLONE_NEWUSER refuses a process with threads; CUDA starts threads); the child joined its cgroups then too, so the
devices cgroup confines the CUDA context to the slot's GPU from its first open(). What remains after the warm-up
must work in a process that has threads:

- pivot_root moves every thread (they share one fs_struct), rlimits are per process, glibc's setresuid changes
  the credentials of every thread, and the seccomp filter is loaded into every thread at once (TSYNC), which
  also sets no_new_privs on each. Niceness is per thread on Linux, so every thread is reniced.
- A directory opened during the warm-up would point outside the new root, so any left open is closed.
- Limits spent on the warm-up are not the learner's: the CPU rlimit counts from what the warm-up used.
"""

from __future__ import annotations

import errno
import os
import resource
import socket
import threading
from dataclasses import dataclass

from app.sandbox import isolation
from app.sandbox.gpus import HOST_DEV, GpuSlot


@dataclass
class Warm:
    """How a warm-first child prepares: for a GPU slot (gpu set) or the CPU."""

    gpu: GpuSlot | None = None
    dev_root: str = HOST_DEV  # where the GPU's nodes are bound from (tests: a tree made with mknod)
    gpu_memory_bytes: int = 0  # bytes of GPU memory the caching allocator may use; 0: no cap
    probe_thread: bool = False  # tests: start a thread now that, after isolation, tries refused syscalls

    def to_dict(self) -> dict:
        """Return a JSON-ready dict (the server asks the zygote for a child this way)."""
        return {"gpu": self.gpu.to_dict() if self.gpu else None, "dev_root": self.dev_root,
                "gpu_memory_bytes": self.gpu_memory_bytes, "probe_thread": self.probe_thread}

    @classmethod
    def from_dict(cls, data: dict) -> "Warm":
        """Rebuild a Warm from to_dict()'s output."""
        return cls(**{**data, "gpu": GpuSlot.from_dict(data["gpu"]) if data.get("gpu") else None})

    def devices(self) -> list[tuple[str, str]]:
        """Return the (host path, name under /dev) device nodes the job's root gets."""
        return [(os.path.join(self.dev_root, n), n) for n in (self.gpu.nodes if self.gpu else ())]

    def env(self) -> dict[str, str]:
        """Return the job's extra environment: its GPU is cuda:0, in every CUDA process it starts."""
        if self.gpu is None:
            return {}
        return {"CUDA_VISIBLE_DEVICES": self.gpu.cuda_visible_devices, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def warm_up(warm: Warm) -> dict:
    """Do the device's first-use work now, before the payload arrives; return what the job will report."""
    if warm.probe_thread:
        PROBE.start()
    if warm.gpu is None or warm.dev_root != HOST_DEV:  # a test tree's nodes have no driver: no CUDA context
        return _warm_cpu()
    return _warm_gpu(warm)


def _warm_cpu() -> dict:
    import torch

    x = torch.ones(8, 8, requires_grad=True)
    (x @ x).sum().backward()
    return {"device": "cpu"}


def _warm_gpu(warm: Warm) -> dict:
    """Create the CUDA context on the slot's GPU and warm cuBLAS, cuDNN and an optimizer step; cap its memory."""
    os.environ.update(warm.env())
    os.environ.pop("PYTORCH_NVML_BASED_CUDA_CHECK", None)  # this process may (must) initialise CUDA
    import torch

    torch.cuda.init()
    x = torch.randn(64, 64, device="cuda")
    (x @ x).sum().item()  # cuBLAS handle and workspace
    conv = torch.nn.Conv2d(1, 2, 3).to("cuda")
    conv(torch.randn(1, 1, 8, 8, device="cuda")).sum().backward()  # cuDNN
    model = torch.nn.Linear(4, 1).to("cuda")
    for opt in (torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.Adam(model.parameters(), lr=0.01)):
        loss = torch.nn.functional.mse_loss(model(torch.randn(8, 4, device="cuda")), torch.zeros(8, 1, device="cuda"))
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    if warm.gpu_memory_bytes:  # a guardrail only: the learner's code can call this again (docs/security.md)
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, warm.gpu_memory_bytes / total), 0)
    return {"device": torch.cuda.get_device_name(0)}


def cpu_seconds_used() -> float:
    """Return this process's CPU time so far (every thread), in seconds."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def check_threads_for_userns() -> None:
    """Refuse a user-namespace child with threads: capabilities are dropped per thread, and only this one would."""
    threads = len(os.listdir("/proc/self/task"))
    if threads > 1:
        raise RuntimeError(f"this warmed-up child has {threads} threads; without root the sandbox can drop "
                           "capabilities in one thread only, so it cannot isolate it (run as root)")


def tighten_rlimits(limits) -> None:
    """Lower the rlimits to a job's own (tighter) limits at hand-over; an unprivileged process may lower them."""
    address_space = isolation.address_space_bytes(limits.memory_bytes, limits.pids)
    for which, value in ((resource.RLIMIT_AS, address_space), (resource.RLIMIT_FSIZE, limits.tmpfs_bytes)):
        _, hard = resource.getrlimit(which)
        value = min(value, hard) if hard != resource.RLIM_INFINITY else value
        resource.setrlimit(which, (value, value))
    cpu = int(cpu_seconds_used()) + 1 + int(limits.cpu_s)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (min(cpu, hard), min(cpu + 1, hard)))


class _ProbeThread:
    """Tests only: a thread that exists before isolation and, when asked after it, tries what seccomp refuses."""

    def __init__(self) -> None:
        self.asked = threading.Event()
        self.done = threading.Event()
        self.answer: dict = {}

    def start(self) -> None:
        threading.Thread(target=self._run, name="warm-probe", daemon=True).start()

    def _run(self) -> None:
        self.asked.wait()
        self.answer = {"inet_socket": _errno_of(lambda: socket.socket(socket.AF_INET).close()),
                       "unshare": _errno_of(lambda: isolation.unshare(isolation.CLONE_NEWNET)),
                       "tid": threading.get_native_id()}
        self.done.set()
        threading.Event().wait()  # stay alive, so the test also sees this thread's status (uid, seccomp)

    def ask(self, timeout: float = 5.0) -> dict:
        """Have the thread try; return {"inet_socket": errno name or "allowed", "unshare": ..., "tid": ...}."""
        self.asked.set()
        self.done.wait(timeout)
        return self.answer


def _errno_of(call) -> str:
    try:
        call()
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    return "allowed"


PROBE = _ProbeThread()
