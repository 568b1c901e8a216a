"""A spike, not part of `make bench`: does a simulated GPU below torch's Python layer cost less than the tracer's mode?

Builds sim.cpp (a PrivateUse1 backend, "simgpu", whose ops run torch's CPU kernels on aliases of host memory through
one boxed C++ fallback: no Python call per op) with the C++ compiler and torch's headers, then measures, in this
process, warm, one thread:
- training-loop's solution on the CPU, on "simgpu", and on the CPU under a TorchFunctionMode that only hands each call
  on (the floor of the course's tracer, bench/grading.py), with the printed output compared;
- a few ops and a small forward + backward on each, in a tight loop;
- whether a child forked after a backward on "simgpu" can run a backward (the fork server warms its children so);
- what a hand-off between two threads costs on this machine (autograd runs a device's backward on its own thread).

Run it from the repository root: `.venv/bin/python bench/spikes/privateuse1/run.py` (about a minute: the build).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import subprocess
import sys
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


def build(folder: Path) -> Path:
    """sim.cpp as a shared library against this torch (g++, C++20 as torch's headers expect, torch's ABI)."""
    torch_dir = Path(torch.__file__).parent
    out = folder / "simdev.so"
    subprocess.run(["g++", "-O2", "-std=c++20", "-shared", "-fPIC", "-DTORCH_EXTENSION_NAME=simdev",
                    f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
                    f"-I{torch_dir / 'include'}", f"-I{torch_dir / 'include' / 'torch' / 'csrc' / 'api' / 'include'}",
                    f"-I{sysconfig.get_paths()['include']}", str(HERE / "sim.cpp"), "-o", str(out),
                    f"-L{torch_dir / 'lib'}", "-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python",
                    f"-Wl,-rpath,{torch_dir / 'lib'}"], check=True)
    return out


def register(library: Path):
    """Load the backend and name it "simgpu" (torch refuses "cuda": an in-tree device name); return the library as a
    Python module (its condvar_round_trip_us)."""
    torch.ops.load_library(str(library))
    spec = importlib.util.spec_from_file_location("simdev", library)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    module = types.ModuleType("simgpu")
    module.is_available = lambda: True
    module.device_count = lambda: 1
    module.current_device = lambda: 0
    module._is_in_bad_fork = lambda: False
    module.manual_seed_all = lambda seed: None
    module.get_amp_supported_dtype = lambda: [torch.float16]
    torch.utils.rename_privateuse1_backend("simgpu")
    torch._register_device_module("simgpu", module)
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


def fork_after_backward() -> str:
    """Run a backward on "simgpu" in a forked child of this process (which has run one); say what happened."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            w = torch.ones(3, device="simgpu", requires_grad=True)
            (w * 2).sum().backward()
            message = b"ran"
        except RuntimeError as exc:
            message = str(exc).split("\n")[0].encode()
        os.write(write, message)
        os._exit(0)
    os.close(write)
    text = os.read(read, 4096).decode()
    os.close(read)
    os.waitpid(pid, 0)
    return text


def main() -> None:
    torch.set_num_threads(1)  # as every job runs
    # mse_loss hands the fallback an out= argument of the wrong shape, which torch resizes (and says so once):
    # the values are right (the printed losses are compared below)
    warnings.filterwarnings("ignore", message="An output with one or more elements was resized")
    with tempfile.TemporaryDirectory() as folder:
        library = register(build(Path(folder)))
    source = SOLUTION.read_text()
    on_simgpu = source.replace('torch.device("cuda" if torch.cuda.is_available() else "cpu")',
                               'torch.device("simgpu")')
    assert on_simgpu != source, "the solution no longer picks its device as this spike expects"
    on_cpu, on_sim = compile(source, "main.py", "exec"), compile(on_simgpu, "main.py", "exec")
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
        x = torch.randn(32, 1, device=device)
        w = torch.randn(1, 16, device=device, requires_grad=True)
        with mode or contextlib.nullcontext():
            mul, matmul = tight(lambda: x * 2), tight(lambda: x @ w)
            step = tight(lambda: (x @ w).pow(2).mean().backward(), 1000)
        label = device + (" under the hand-on mode" if mode else "")
        print(f"  {label:28s} x * 2 {mul:5.2f} us   x @ w {matmul:5.2f} us   forward + backward {step:6.1f} us")
    print("a child forked after a backward on simgpu, running one:", fork_after_backward())
    print(f"a round trip between two threads through a condition variable (this machine's hand-off): "
          f"{library.condvar_round_trip_us(21):.1f} us")


if __name__ == "__main__":
    sys.exit(main())
