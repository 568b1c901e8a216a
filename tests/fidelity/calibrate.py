"""Time a real GPU for the simulated clock: `python -m tests.fidelity.calibrate [--machine ID] [--out PATH]`.

Run from the repository root on a CUDA host (scripts/gpu-check runs it after the card's claim). Like record.py it
imports only torch and the standard library. It writes tests/fidelity/calibration/<machine>.json, the figures the
simulated GPU's clock (app/harness/machine/) is compared against:

    {"machine": "h200", "torch": "2.11.0+cu130", "device_name": "NVIDIA H200",
     "matmul": [{"n": 256, "dtype": "float32", "tf32": false, "ms": 0.01}, ...],
     "copy": [{"direction": "h2d", "mib": 256, "pinned": true, "ms": 5.0}, ...],
     "launch_us": 2.5, "item_us": 10.0, "mlp_step_ms": 0.5,
     "elementwise": [{"op": "add", "mib": 256, "ms": 0.2}]}

What each figure is (every one a median after warm-up, on random data, never zeros):
- matmul: one square n x n @ n x n product, timed with CUDA events around the single call; float32 both with
  torch.backends.cuda.matmul.allow_tf32 off and on, bfloat16 and float16 (tf32 false: the flag is float32's only).
- copy: one 256 MiB tensor copied host-to-device or device-to-host (`dst.copy_(src)`, non_blocking when pinned),
  timed with CUDA events; pinned: the host side is page-locked.
- launch_us: wall-clock time per launch of `x.add_(1)` on a one-element tensor, over 1000 launches and one
  synchronize (what a Python loop of tiny ops costs).
- item_us: wall-clock time of `.item()` on a GPU scalar that is already computed (a synchronize and a 4-byte copy).
- mlp_step_ms: one SGD step of Linear(1024, 4096)-ReLU-Linear(4096, 1024), batch 256, float32 (tf32 off),
  zero_grad + forward + MSE loss + backward + step, then synchronize, wall-clock.
- elementwise: `torch.add(a, b, out=c)` with each of a, b, c float32 of `mib` MiB (so 3 x mib MiB moved),
  timed with CUDA events.

`--dry-run` runs the same code on the CPU with tiny sizes and few repetitions and prints the JSON (nothing is
written): it proves the script on a host without a GPU; its numbers mean nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
CALIBRATION = HERE / "calibration"
MATMUL_SIZES = (256, 1024, 4096)
# (dtype name, tf32): float32 without and with TF32 tensor cores, then the two half-precision types
MATMUL_KINDS = (("float32", False), ("float32", True), ("bfloat16", False), ("float16", False))
COPY_MIB = 256
ELEMENTWISE_MIB = 256
LAUNCHES = 1000
# timed repetitions per figure (after WARMUP untimed ones); enough for a stable median, little device time
WARMUP, REPEATS = 5, 30


class Clock:
    """Times one callable: with CUDA events on a GPU, with the wall clock (after a synchronize) otherwise."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def events_ms(self, fn, repeats: int = REPEATS, warmup: int = WARMUP) -> float:
        """Median milliseconds of fn() measured on the device's own timeline (CUDA events around each call)."""
        for _ in range(warmup):
            fn()
        self.sync()
        times = []
        for _ in range(repeats):
            if self.cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            else:
                started = time.perf_counter()
                fn()
                times.append((time.perf_counter() - started) * 1000)
        return statistics.median(times)

    def wall_ms(self, fn, repeats: int = REPEATS, warmup: int = WARMUP) -> float:
        """Median wall-clock milliseconds of fn() followed by a synchronize."""
        for _ in range(warmup):
            fn()
        self.sync()
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            fn()
            self.sync()
            times.append((time.perf_counter() - started) * 1000)
        return statistics.median(times)


def _matmul(clock: Clock, device: torch.device, sizes, repeats: int) -> list[dict]:
    rows = []
    previous = torch.backends.cuda.matmul.allow_tf32
    try:
        for n in sizes:
            for name, tf32 in MATMUL_KINDS:
                torch.backends.cuda.matmul.allow_tf32 = tf32
                a = torch.randn(n, n, device=device, dtype=getattr(torch, name))
                b = torch.randn(n, n, device=device, dtype=getattr(torch, name))
                ms = clock.events_ms(lambda: a @ b, repeats=repeats)
                rows.append({"n": n, "dtype": name, "tf32": tf32, "ms": round(ms, 5)})
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    return rows


def _copies(clock: Clock, device: torch.device, mib: int, repeats: int) -> list[dict]:
    if device.type != "cuda":
        return []  # pinned memory and host-device copies need a GPU
    rows, count = [], (mib << 20) // 4
    gpu = torch.randn(count, device=device)
    for pinned in (False, True):
        host = torch.randn(count).pin_memory() if pinned else torch.randn(count)
        h2d = clock.events_ms(lambda: gpu.copy_(host, non_blocking=pinned), repeats=repeats, warmup=2)
        d2h = clock.events_ms(lambda: host.copy_(gpu, non_blocking=pinned), repeats=repeats, warmup=2)
        rows += [{"direction": "h2d", "mib": mib, "pinned": pinned, "ms": round(h2d, 4)},
                 {"direction": "d2h", "mib": mib, "pinned": pinned, "ms": round(d2h, 4)}]
    return rows


def _launch_us(clock: Clock, device: torch.device, launches: int) -> float:
    x = torch.zeros(1, device=device)

    def loop():
        for _ in range(launches):
            x.add_(1)

    return round(clock.wall_ms(loop, repeats=7, warmup=1) * 1000 / launches, 3)


def _item_us(clock: Clock, device: torch.device) -> float:
    y = torch.randn(1024, device=device).sum()
    clock.sync()
    times = []
    for _ in range(WARMUP + 200):
        started = time.perf_counter()
        y.item()
        times.append((time.perf_counter() - started) * 1e6)
    return round(statistics.median(times[WARMUP:]), 3)


def _mlp_step_ms(clock: Clock, device: torch.device, width: int, hidden: int, batch: int) -> float:
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        model = torch.nn.Sequential(torch.nn.Linear(width, hidden), torch.nn.ReLU(),
                                    torch.nn.Linear(hidden, width)).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        x, target = torch.randn(batch, width, device=device), torch.randn(batch, width, device=device)

        def step():
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), target)
            loss.backward()
            optimizer.step()

        return round(clock.wall_ms(step, repeats=50, warmup=10), 4)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous


def _elementwise(clock: Clock, device: torch.device, mib: int, repeats: int) -> list[dict]:
    count = (mib << 20) // 4
    a, b, c = (torch.randn(count, device=device) for _ in range(3))
    ms = clock.events_ms(lambda: torch.add(a, b, out=c), repeats=repeats)
    return [{"op": "add", "mib": mib, "ms": round(ms, 4)}]


def calibrate(machine: str, device: torch.device, dry_run: bool = False) -> dict:
    """Measure every figure on `device`; dry_run: tiny sizes and few repetitions (proves the code, not the card)."""
    clock = Clock(device)
    small = dry_run
    sizes = (32, 64) if small else MATMUL_SIZES
    repeats = 3 if small else REPEATS
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    torch.manual_seed(0)
    return {
        "machine": machine,
        "torch": torch.__version__,
        "device_name": name,
        "matmul": _matmul(clock, device, sizes, repeats),
        "copy": _copies(clock, device, 1 if small else COPY_MIB, repeats),
        "launch_us": _launch_us(clock, device, 50 if small else LAUNCHES),
        "item_us": _item_us(clock, device),
        "mlp_step_ms": _mlp_step_ms(clock, device, *((64, 128, 8) if small else (1024, 4096, 256))),
        "elementwise": _elementwise(clock, device, 1 if small else ELEMENTWISE_MIB, repeats),
    }


def default_machine(device_name: str) -> str:
    """A machine id from the GPU's name when none is given: 'NVIDIA H200' -> 'h200' (profiles' ids are lowercase)."""
    return device_name.split()[-1].lower()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machine", help="the machine profile's id (default: from the GPU's name, e.g. h200)")
    parser.add_argument("--out", help="where to write the JSON (default: tests/fidelity/calibration/<machine>.json)")
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny sizes, print only")
    args = parser.parse_args(argv)
    if args.dry_run:
        print(json.dumps(calibrate(args.machine or "cpu", torch.device("cpu"), dry_run=True), indent=1))
        return 0
    if not torch.cuda.is_available():
        print("calibrate: this host has no usable CUDA GPU (use --dry-run to test the script)", file=sys.stderr)
        return 2
    machine = args.machine or default_machine(torch.cuda.get_device_name(0))
    figures = calibrate(machine, torch.device("cuda", 0))
    out = Path(args.out) if args.out else CALIBRATION / f"{machine}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(figures))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
