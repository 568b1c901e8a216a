"""A real GPU in the sandbox: warm GPU job latency against a cold CUDA interpreter, and training-loop graded on it.

Measured in the same run, on a host with a GPU (and the CUDA build of torch): a cold `python -c "import torch;
torch.ones(1, device='cuda')"` against a GPU job handed to a warm GPU slot's child (its CUDA context made, then
isolated); and `course grade training-loop` of the solution on the real GPU (the exercise says `needs_gpu`).
On a host without one it prints `no GPU on this host` and measures nothing.

Run alone with `python -m bench gpu`. Targets: warm GPU job p50 < 100 ms and >= 20x faster than cold.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from app.content.exercises import load_exercise
from app.core.config import ROOT, Settings
from app.grading import grade_submission
from app.runner import BlockingRunner, Job
from app.runner.local import LocalRunner
from app.sandbox import gpus
from bench.sandbox import pct

RESULTS = Path(__file__).parent / "results"
RUNS = 15
# seconds between two GPU jobs: a learner's pause, in which the slot is released and its next child makes its
# CUDA context; a job arriving sooner waits for that, which is not a warm job
PREPARE_PAUSE_S = 4.0
COLD_RUNS = 5
COLD = "import torch; torch.ones(1, device='cuda')"
JOB = "import torch\nx = torch.ones(256, 256, device='cuda')\nprint((x @ x).sum().item())\n"
TARGETS = {"warm_gpu_p50_ms": 100.0, "speedup_x": 20.0}


def _settings() -> Settings:
    return Settings(env="test", secret_key="bench", runner_queue_size=1000)


def measure_cold(runs: int = COLD_RUNS) -> dict:
    """Time a fresh interpreter that imports torch and makes one CUDA tensor."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin"), "LD_LIBRARY_PATH": os.environ.get("LD_LIBRARY_PATH", "")}
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", COLD], check=True, capture_output=True, env=env)
        times.append((time.perf_counter() - started) * 1000)
    return {"runs": runs, "p50_ms": round(pct(times, 50), 1)}


def measure_warm(runner: BlockingRunner, runs: int = RUNS) -> dict:
    """Time a small GPU job handed to a warm slot's child, end to end as the caller sees it."""
    times = []
    for _ in range(runs):
        time.sleep(PREPARE_PAUSE_S)
        started = time.perf_counter()
        result = runner.run(Job(code=JOB, filename="gpu_bench.py", gpu=True))
        times.append((time.perf_counter() - started) * 1000)
        assert result.status == "ok", result
    return {"runs": runs, "p50_ms": round(pct(times, 50), 1), "p95_ms": round(pct(times, 95), 1)}


def measure_grading(runner: BlockingRunner, runs: int = 5) -> dict:
    """Grade training-loop's solution on the real GPU; p50 and the verdicts' device strings."""
    exercise = load_exercise(ROOT / "exercises" / "training-loop")
    times, devices, statuses = [], set(), set()
    for _ in range(runs):
        time.sleep(PREPARE_PAUSE_S)
        started = time.perf_counter()
        verdict = runner.call(grade_submission(exercise, exercise.solution, runner.runner))
        times.append((time.perf_counter() - started) * 1000)
        devices.add(verdict.device)
        statuses.add(verdict.status)
    return {"runs": runs, "p50_ms": round(pct(times, 50), 1), "devices": sorted(devices),
            "statuses": sorted(statuses)}


def run() -> dict:
    """Measure on a GPU host; on another, say so and return no figures."""
    found, why = gpus.discover()
    if not found:
        print(f"no GPU on this host ({why})")
        return {"gpu": None}
    # the local fork server's GPU slot itself, not the site's backend switch (app.main imports the web app)
    with BlockingRunner(_settings(), runner=LocalRunner(_settings())) as runner:
        warm = measure_warm(runner)
        grading = measure_grading(runner)
    cold = measure_cold()
    speedup = round(cold["p50_ms"] / warm["p50_ms"], 1)
    figures = {"gpu": found[0].name, "warm": warm, "cold": cold, "speedup_x": speedup, "grade_training_loop": grading,
               "targets": TARGETS, "met": {"warm_gpu_p50_ms": warm["p50_ms"] < TARGETS["warm_gpu_p50_ms"],
                                           "speedup_x": speedup >= TARGETS["speedup_x"]}}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "gpu.json").write_text(json.dumps(figures, indent=2) + "\n")
    return figures


def table(f: dict) -> str:
    """Render the figures as a table (one line on a host without a GPU)."""
    if not f.get("gpu"):
        return "  no GPU on this host"
    ok = lambda key: "met" if f["met"][key] else "MISSED"  # noqa: E731
    return "\n".join([
        f"  GPU: {f['gpu']}",
        f"  cold python -c (import torch + one CUDA tensor)   p50 {f['cold']['p50_ms']:.0f} ms",
        f"  warm GPU job (isolated, own CUDA context)         p50 {f['warm']['p50_ms']:.1f} ms  "
        f"p95 {f['warm']['p95_ms']:.1f} ms  (< {TARGETS['warm_gpu_p50_ms']:.0f} ms: {ok('warm_gpu_p50_ms')})",
        f"  speed-up                                          {f['speedup_x']}x  "
        f"(>= {TARGETS['speedup_x']:.0f}x: {ok('speedup_x')})",
        f"  course grade training-loop on the GPU             p50 {f['grade_training_loop']['p50_ms']:.0f} ms  "
        f"{', '.join(f['grade_training_loop']['statuses'])} on {', '.join(f['grade_training_loop']['devices'])}",
    ])


if __name__ == "__main__":
    print(table(run()))
