"""A spike, not part of `make bench`: does a simulated GPU below torch's Python layer cost less than the tracer's mode?

Builds sim.cpp (a backend whose ops run torch's CPU kernels on aliases of host memory through one boxed C++ fallback:
no Python call per op) with the C++ compiler and torch's headers, twice.

First as PrivateUse1, named "simgpu", and measures in this process, warm, one thread:
- training-loop's solution on the CPU, on "simgpu", and on the CPU under a TorchFunctionMode that only hands each call
  on (the floor of the course's tracer, bench/grading.py), with the printed output compared;
- a few ops and a small forward + backward on each, in a tight loop;
- whether a child forked after a backward on "simgpu" can run a backward (the fork server warms its children so);
- what a hand-off between two threads costs on this machine (autograd runs a device's backward on its own thread).

Then under torch's own CUDA keys (-DSIM_CUDA), in a fresh process (`--cuda-key LIBRARY`: the library must be loaded
before torch is), with autograd's engine started without device threads and run on the calling thread
(cuda_key_main): what torch itself says of its tensors and a cross-device op, training-loop unchanged on the CPU and
on "cuda" (warm, and in children forked from the warm process, as jobs are), the tight loops, and the fork check.

Last, in the target's own units: the course's sandbox server started with that build loaded first (`--server`, as
the runner's `python`), and training-loop's solution as its `run` jobs, on the CPU and on "cuda" with the size and
clock model on (in_the_sandbox).

Run it from the repository root: `.venv/bin/python bench/spikes/privateuse1/run.py` (about a minute: the builds).
"""

from __future__ import annotations

import ctypes
import os
import sys

if __name__ == "__main__" and sys.argv[1:2] in (["--cuda-key"], ["--server"]):
    # the CUDA build registers CUDA's hooks, which torch creates once, the first time it asks for them, and
    # `import torch` asks: so the library goes in first (sim.cpp, CUDAHooks)
    ctypes.CDLL(sys.argv[2], mode=os.RTLD_GLOBAL)

# (the library above must come before torch)
import contextlib
import importlib.util
import io
import json
import resource
import runpy
import subprocess
import sysconfig
import tempfile
import time
import types
import warnings
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode

HERE = Path(__file__).parent
SOLUTION = HERE.parents[2] / "exercises" / "training-loop" / "solution.py"
RUNS = 21
# torch.cuda's Python layer asks a CUDA runtime that a CPU-only build lacks: the three answers the course's harness
# gives, run before a program on "cuda" (cuda_key_main, and the sandbox's jobs)
CUDA_ANSWERS = ("import torch\n"
                "torch.cuda._lazy_init = lambda: None\n"
                "torch.cuda.is_available = lambda: True\n"
                "torch.cuda.device_count = lambda: 1\n")


def build(folder: Path, cuda_key: bool = False) -> Path:
    """sim.cpp as a shared library against this torch (g++, C++20 as torch's headers expect, torch's ABI); under the
    CUDA keys with cuda_key."""
    torch_dir = Path(torch.__file__).parent
    out = folder / ("simcuda.so" if cuda_key else "simdev.so")
    subprocess.run(["g++", "-O2", "-std=c++20", "-shared", "-fPIC", "-DTORCH_EXTENSION_NAME=simdev",
                    *(["-DSIM_CUDA"] if cuda_key else []),
                    f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
                    f"-I{torch_dir / 'include'}", f"-I{torch_dir / 'include' / 'torch' / 'csrc' / 'api' / 'include'}",
                    f"-I{sysconfig.get_paths()['include']}", str(HERE / "sim.cpp"), "-o", str(out),
                    f"-L{torch_dir / 'lib'}", "-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python",
                    f"-Wl,-rpath,{torch_dir / 'lib'}"], check=True)
    return out


def on_device(source: str, device: str) -> str:
    """training-loop's solution with its device fixed to `device` where it picks one."""
    fixed = source.replace('torch.device("cuda" if torch.cuda.is_available() else "cpu")', f'torch.device("{device}")')
    assert fixed != source, "the solution no longer picks its device as this spike expects"
    return fixed


def as_module(library: Path):
    """The library's Python functions (condvar_round_trip_us, set_profile, model_off, model_state)."""
    spec = importlib.util.spec_from_file_location("simdev", library)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def register(library: Path):
    """Load the backend and name it "simgpu" (torch refuses "cuda": an in-tree device name); return the library as a
    Python module."""
    torch.ops.load_library(str(library))
    loaded = as_module(library)
    module = types.ModuleType("simgpu")
    module.is_available = lambda: True
    module.device_count = lambda: 1
    module.current_device = lambda: 0
    module._is_in_bad_fork = lambda: False
    module.manual_seed_all = lambda seed: None
    module.get_amp_supported_dtype = lambda: [torch.float16]
    torch.utils.rename_privateuse1_backend("simgpu")
    torch._register_device_module("simgpu", module)
    # a tensor on the device before the first backward, so that the engine starts with its device thread, as it
    # does on a real GPU host (sim.cpp, g_device_used): this part measures that thread's hand-off
    torch.empty(0, device="simgpu")
    return loaded


class HandOn(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def once(code, mode=None) -> tuple[float, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), (mode or contextlib.nullcontext()):
        started = time.thread_time()
        exec(code, {"__name__": "__main__"})
        return (time.thread_time() - started) * 1000, out.getvalue()


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def tight(call, n: int = 3000) -> float:
    """Median microseconds of call() over n calls."""
    times = []
    for _ in range(n):
        started = time.perf_counter_ns()
        call()
        times.append(time.perf_counter_ns() - started)
    return median(times) / 1000


def print_tight(device: str, mode=None) -> None:
    """A few ops and a small forward + backward on `device` (under `mode`), each in a tight loop."""
    x = torch.randn(32, 1, device=device)
    w = torch.randn(1, 16, device=device, requires_grad=True)
    with mode or contextlib.nullcontext():
        mul, matmul = tight(lambda: x * 2), tight(lambda: x @ w)
        step = tight(lambda: (x @ w).pow(2).mean().backward(), 1000)
    label = device + (" under the hand-on mode" if mode else "")
    print(f"  {label:28s} x * 2 {mul:5.2f} us   x @ w {matmul:5.2f} us   forward + backward {step:6.1f} us")


def quiet_resize_warning() -> None:
    """mse_loss hands the fallback an out= argument of the wrong shape, which torch resizes (and says so once): the
    values are right (every part compares the printed losses)."""
    warnings.filterwarnings("ignore", message="An output with one or more elements was resized")


def in_child(measure) -> str:
    """measure() in a forked child of this process; what it returns, or its error's first line, as text."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            message = str(measure())
        except Exception as exc:  # noqa: BLE001 - the parent prints what went wrong
            message = f"{type(exc).__name__}: " + str(exc).split("\n")[0]
        os.write(write, message.encode())
        os._exit(0)
    os.close(write)
    text = os.read(read, 4096).decode()
    os.close(read)
    os.waitpid(pid, 0)
    return text


def minor_faults(call) -> int:
    """The minor page faults this process takes while call() runs."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    call()
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def fork_after_backward(device: str = "simgpu") -> str:
    """Run a backward on `device` in a forked child of this process (which has run one); say what happened."""

    def backward() -> str:
        w = torch.ones(3, device=device, requires_grad=True)
        (w * 2).sum().backward()
        return f"ran (its gradient: {w.grad})"

    return in_child(backward)


def start_engine_on_calling_thread() -> None:
    """Start autograd's engine as a CPU-only host would, then keep every backward on the calling thread. Call it
    before any tensor is made on the device.

    The engine starts once, on the first backward: it makes a thread per device the guards report and, having made
    one, refuses backwards in any later fork. Until a tensor is on the device the guard reports none (sim.cpp,
    g_device_used), so a CPU backward starts it with neither. Backwards on the calling thread then never look for
    a device thread (set_multithreading_enabled is per thread: a backward in another thread of the program
    would)."""
    torch.ones(1, requires_grad=True).sum().backward()
    torch.autograd.set_multithreading_enabled(False)


def h100_model() -> tuple:
    """set_profile's figures for the course's H100: the machine profile's fp32 peak, memory bandwidth and capacity
    (app/harness/machine/machines/h100.json, each with its source there), clock.py's efficiencies, kernel floor and
    launch cost (each with its source there)."""
    sys.path.insert(0, str(HERE.parents[2]))
    from app.harness.machine import clock

    figures = json.loads((HERE.parents[2] / "app" / "harness" / "machine" / "machines" / "h100.json").read_text())
    return (figures["peak_flops"]["fp32"]["value"] * clock.COMPUTE_EFFICIENCY,
            figures["memory_bandwidth"]["value"] * clock.MEMORY_EFFICIENCY, figures["total_memory"]["value"],
            clock.KERNEL_FLOOR_S, clock.LAUNCH_S)


def cuda_key_main(library: Path) -> None:
    """The CUDA build, loaded before torch (see the top of this file): what torch says of its tensors, and what it
    costs."""
    torch.set_num_threads(1)
    quiet_resize_warning()
    loaded = as_module(library)
    exec(CUDA_ANSWERS, {})
    start_engine_on_calling_thread()
    on_gpu = torch.ones(2).cuda()
    print(f"  torch's own words: {on_gpu!r}; device {on_gpu.device}, is_cuda {on_gpu.is_cuda}")
    try:
        on_gpu + torch.ones(2)
    except RuntimeError as exc:
        print(f"  a cross-device op: {exc}")
    source = SOLUTION.read_text()
    on_cpu, on_cuda = compile(on_device(source, "cpu"), "main.py", "exec"), compile(source, "main.py", "exec")
    print("  training-loop, unchanged, prints the same on cuda as on the CPU:", once(on_cpu)[1] == once(on_cuda)[1])
    profile = h100_model()

    def modeled() -> float:
        loaded.set_profile(*profile)
        try:
            return once(on_cuda)[0]
        finally:
            loaded.model_off()

    runs = {"CPU": lambda: once(on_cpu)[0], "cuda": lambda: once(on_cuda)[0], "cuda with size and clock": modeled}
    warm = {label: [] for label in runs}
    for _ in range(RUNS):  # alternated, so a slower stretch of the machine falls on all three
        for label, run_once in runs.items():
            warm[label].append(run_once())
    # ... and each run in a child forked from this warm process, as a job's child is (bench/grading.py, _floor)
    forked = {label: [] for label in runs}
    for _ in range(RUNS):
        for label, run_once in runs.items():
            forked[label].append(float(in_child(run_once)))
    for where, figures in (("warm", warm), ("each in a forked child", forked)):
        cpu = median(figures["CPU"])
        print(f"  training-loop, {where}, p50 of {RUNS}: CPU {cpu:.2f} ms; " + "; ".join(
            f"{label} {median(figures[label]):.2f} ms ({median(figures[label]) / cpu:.2f}x)"
            for label in ("cuda", "cuda with size and clock")))
    # the page faults of one run in such a child: each first write to a page it shares with its parent copies it
    faults = {label: [] for label in ("CPU", "cuda")}
    for _ in range(RUNS):
        for label in faults:
            faults[label].append(float(in_child(lambda label=label: minor_faults(runs[label]))))
    print("  minor page faults of one run in a forked child, p50: " + "; ".join(
        f"{label} {median(values):.0f}" for label, values in faults.items()))
    loaded.set_profile(*profile)
    once(on_cuda)
    state = loaded.model_state()
    print(f"  what the model kept of one run on the H100: {state['kernels']:.0f} kernels, the stream busy until "
          f"{state['stream_end_s'] * 1000:.2f} ms and the host's launches at {state['host_s'] * 1000:.2f} ms, "
          f"{state['peak'] / 2**20:.2f} MiB held at most")
    try:
        torch.empty(profile[2] // 4 + 1, device="cuda")
    except torch.OutOfMemoryError as exc:
        print(f"  a tensor larger than the card: {type(exc).__name__}: {exc}")
    loaded.model_off()
    for device in ("cpu", "cuda"):
        print_tight(device)
    print("  a child forked after a backward on cuda, running one:", fork_after_backward("cuda"))


def warm_on_cuda() -> None:
    """The first-use work on "cuda" that the server's warm-up does for the CPU and a real GPU (app/sandbox/warm.py,
    _warm_gpu: a product, an optimizer step with SGD and with Adam), so that no job is the first to run the
    fallback's code. torch.cuda's lazy initialisation is answered for it only: the server itself must still see no
    CUDA."""
    lazy_init = torch.cuda._lazy_init
    torch.cuda._lazy_init = lambda: None
    try:
        x = torch.randn(64, 64, device="cuda")
        (x @ x).sum().item()
        model = torch.nn.Linear(4, 1).to("cuda")
        for opt in (torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.Adam(model.parameters(), lr=0.01)):
            loss = torch.nn.functional.mse_loss(model(torch.randn(8, 4, device="cuda")),
                                                torch.zeros(8, 1, device="cuda"))
            opt.zero_grad()
            loss.backward()
            opt.step()
    finally:
        torch.cuda._lazy_init = lazy_init


def server_main(library: Path, argv: list[str]) -> None:
    """The course's sandbox server (`-m app.sandbox.server ...`, as the runner starts it) with the CUDA build loaded
    before torch, autograd's engine started on the calling thread, and the size and clock model on, so that every job
    forked from it may use "cuda"."""
    quiet_resize_warning()
    start_engine_on_calling_thread()
    warm_on_cuda()
    as_module(library).set_profile(*h100_model())
    assert argv[0] == "-m", argv
    sys.path.insert(0, str(HERE.parents[2]))  # as `python -m` from the repository root
    sys.argv = [argv[1], *argv[2:]]
    runpy.run_module(argv[1], run_name="__main__", alter_sys=True)


def in_the_sandbox(library: Path, folder: Path) -> None:
    """training-loop's solution as the course's `run` jobs (sandbox, PLAIN_CPU: no tracer) on a fork server that has
    the CUDA build: unchanged (it picks the CPU: torch.cuda answers no), and after CUDA_ANSWERS (it picks "cuda"),
    alternated; p50 of each, end to end as bench/grading.py times its plain job."""
    sys.path.insert(0, str(HERE.parents[2]))
    from app.core.config import Settings
    from app.harness.contract import PLAIN_CPU
    from app.runner import BlockingRunner, Job

    python = folder / "python"  # what the runner starts as `python -m app.sandbox.server ...`
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{Path(__file__).resolve()}" --server "{library}" "$@"\n')
    python.chmod(0o755)
    # each job ends by saying where its model was, which the comparison of their outputs leaves out
    solution = SOLUTION.read_text() + 'print("the model on", next(model.parameters()).device)\n'
    jobs = {"CPU": solution, "cuda, with size and clock": CUDA_ANSWERS + solution}
    times = {label: [] for label in jobs}
    outputs = {}
    settings = Settings(env="test", secret_key="spike", runner_queue_size=1000)
    with BlockingRunner(settings, python=str(python)) as runner:
        for i in range(3 + RUNS):  # 3 to warm up, as bench/grading.py's WARMUP
            for label, code in jobs.items():
                time.sleep(0.05)  # the pool refills, as bench/grading.py's PAUSE_S
                started = time.perf_counter()
                result = runner.run(Job(code=code, filename="main.py", host=PLAIN_CPU))
                elapsed = (time.perf_counter() - started) * 1000
                assert result.status == "ok", (label, result.status, result.stderr[-2000:])
                outputs[label] = result.stdout.splitlines()
                if i >= 3:
                    times[label].append(elapsed)
        capacity = h100_model()[2]
        too_large = runner.run(Job(code=CUDA_ANSWERS + f"try:\n    torch.empty({capacity} // 4 + 1, device='cuda')\n"
                                   "except torch.OutOfMemoryError as exc:\n    print(type(exc).__name__, exc)\n",
                                   filename="main.py", host=PLAIN_CPU))
    print("  training-loop prints the same losses in both jobs:", len({tuple(o[:-1]) for o in outputs.values()}) == 1,
          "; " + "; ".join(f"{label}: {o[-1]}" for label, o in outputs.items()))
    print("  a job asking for more than the card holds:", too_large.stdout.strip() or too_large.stderr[-300:])
    cpu = median(times["CPU"])
    label = "cuda, with size and clock"
    print(f"  training-loop as a sandboxed run job, p50 of {RUNS}: CPU {cpu:.1f} ms; {label} "
          f"{median(times[label]):.1f} ms ({median(times[label]) / cpu:.2f}x)")


def main() -> None:
    if sys.argv[1:2] == ["--cuda-key"]:
        return cuda_key_main(Path(sys.argv[2]))
    if sys.argv[1:2] == ["--server"]:
        return server_main(Path(sys.argv[2]), sys.argv[3:])
    torch.set_num_threads(1)  # as every job runs
    quiet_resize_warning()
    with tempfile.TemporaryDirectory() as folder:
        library = register(build(Path(folder)))
    source = SOLUTION.read_text()
    on_cpu, on_sim = compile(source, "main.py", "exec"), compile(on_device(source, "simgpu"), "main.py", "exec")
    print("training-loop prints the same on simgpu as on the CPU:", once(on_cpu)[1] == once(on_sim)[1])
    cpu, sim, mode = [], [], []
    for _ in range(RUNS):  # alternated, so a slower stretch of the machine falls on all three
        cpu.append(once(on_cpu)[0])
        sim.append(once(on_sim)[0])
        mode.append(once(on_cpu, HandOn())[0])
    print(f"training-loop, warm, p50 of {RUNS}: CPU {median(cpu):.2f} ms; simgpu {median(sim):.2f} ms "
          f"({median(sim) / median(cpu):.2f}x); CPU under the hand-on mode {median(mode):.2f} ms "
          f"({median(mode) / median(cpu):.2f}x)")
    for device, mode in (("cpu", None), ("simgpu", None), ("cpu", HandOn())):
        print_tight(device, mode)
    print("a child forked after a backward on simgpu, running one:", fork_after_backward())
    print(f"a round trip between two threads through a condition variable (this machine's hand-off): "
          f"{library.condvar_round_trip_us(21):.1f} us")
    print("under torch's own CUDA keys, in a fresh process, autograd on the calling thread:", flush=True)
    with tempfile.TemporaryDirectory() as folder:
        cuda_build = build(Path(folder), cuda_key=True)
        subprocess.run([sys.executable, __file__, "--cuda-key", str(cuda_build)], check=True)
        print("the same, loaded in the course's sandbox server (jobs are its forks):", flush=True)
        in_the_sandbox(cuda_build, Path(folder))


if __name__ == "__main__":
    sys.exit(main())
