"""The simulated clock (issue 26): what its timing programs cost to run, and how far its modeled times are from a
real GPU's.

- Wall time: each of the issue's timing programs (tests/support/clock_programs.py, the ones
  tests/harness/test_device_clock.py checks: an MLP step, a synchronized 1024 matmul, ten matmuls between
  events, 256 MiB copies, the `.item()` loop) as a `run` job on the simulated H100, beside the same code on the
  plain CPU (PLAIN_CPU: no simulated GPU, no tracer; "cuda" is "cpu" there and CUDA's calls are stand-ins), each
  end to end as the caller sees it (the median of RUNS under the simulation, HOST_RUNS on the plain CPU). The
  host side computes what the simulation only models: the 4096 x 4096 products of the `.item()` loop, which the
  simulated GPU keeps without values, run for real there.
- `time_model_error`: the median relative error, |modeled - recorded| / recorded, of the figures
  tests/fidelity/test_calibration.py compares (tests/support/calibration.py: matmuls of 1024 and 4096 in four
  dtypes, 256 MiB copies to the device pageable and pinned) between the simulated H200 and the recordings of a
  real one (tests/fidelity/calibration/h200.json); `null` without a recording.

Writes bench/results/clock.json.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path

from app.core.config import Settings
from app.harness.contract import PLAIN_CPU
from app.runner import BlockingRunner, Job
from tests.support import calibration, clock_programs

RESULTS = Path(__file__).parent / "results"
RUNS = 3  # each program under the simulation (a few seconds each)
# the plain CPU side runs once: its `.item()` loop computes 20 products of 137 GFLOP for real (minutes on 2 cores)
HOST_RUNS = 1
# the timing programs, in the order the issue lists them (the `sleep` part only checks the clock)
PROGRAMS = ("matmul_synchronized", "ten_matmuls_events", "copies_256mib", "item_loop", "mlp_step")
# limits for both sides: the plain CPU's loop takes minutes of wall and CPU time (torch uses both cores)
WALL_S, CPU_S = 900.0, 1800


def _wall_ms(runner: BlockingRunner, job: Job, runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        result = runner.run(job)
        times.append((time.perf_counter() - started) * 1000)
        if result.status != "ok":
            raise RuntimeError(f"{job.filename} ended {result.status}: {result.message}\n{result.stderr[-2000:]}")
    return round(statistics.median(times), 1)


def time_model_error() -> dict:
    """The modeled H200 against the recorded one: the median relative error and each figure."""
    if not calibration.RECORDED.exists():
        return {"time_model_error": None, "pairs": []}
    with tempfile.TemporaryDirectory() as workdir:
        compared = calibration.pairs(calibration.run_modeled(Path(workdir)), calibration.recorded())
    return {"time_model_error": round(calibration.median_relative_error(compared), 3),
            "pairs": [{"figure": what, "modeled_ms": round(ours, 4), "recorded_ms": real}
                      for what, ours, real in compared]}


def run(runs: int = RUNS, host_runs: int = HOST_RUNS) -> dict:
    """Time every program both ways and compare the model with the recordings; write bench/results/clock.json."""
    settings = Settings(env="test", secret_key="bench", runner_queue_size=1000, sandbox_wall_s=WALL_S,
                        sandbox_cpu_s=CPU_S)
    programs = {}
    with BlockingRunner(settings) as runner:
        for name in PROGRAMS:
            simulated = _wall_ms(runner, Job(code=clock_programs.program(name), filename=f"{name}.py"), runs)
            host = _wall_ms(runner, Job(code=clock_programs.host(name), filename=f"{name}.py", host=PLAIN_CPU),
                            host_runs)
            programs[name] = {"simulated_ms": simulated, "host_ms": host,
                              "simulated_over_host": round(simulated / host, 3) if host else None}
    model = time_model_error()
    sim_total = round(sum(p["simulated_ms"] for p in programs.values()), 1)
    host_total = round(sum(p["host_ms"] for p in programs.values()), 1)
    figures = {"programs": programs, "runs": runs, "host_runs": host_runs, "clock_sim_wall_ms": sim_total,
               "clock_host_wall_ms": host_total,
               "clock_sim_over_host": round(sim_total / host_total, 3) if host_total else None,
               "time_model_error": model["time_model_error"], "model_pairs": model["pairs"]}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "clock.json").write_text(json.dumps(figures, indent=2) + "\n")
    return figures


def table(f: dict) -> str:
    """The figures, a line per program."""
    lines = [f"  {'program':<22} {'simulated (ms)':>15} {'plain CPU (ms)':>15} {'ratio':>7}"]
    for name, p in f["programs"].items():
        lines.append(f"  {name:<22} {p['simulated_ms']:>15,.1f} {p['host_ms']:>15,.1f} "
                     f"{p['simulated_over_host'] or 0:>7.2f}")
    lines.append(f"  {'all':<22} {f['clock_sim_wall_ms']:>15,.1f} {f['clock_host_wall_ms']:>15,.1f} "
                 f"{f['clock_sim_over_host'] or 0:>7.2f}   (median of {f['runs']} simulated runs, "
                 f"{f['host_runs']} on the plain CPU)")
    if f["time_model_error"] is None:
        lines.append("  time_model_error: no recording of a real GPU")
    else:
        lines.append(f"  time_model_error {f['time_model_error']} (median |modeled - recorded| / recorded, "
                     f"{len(f['model_pairs'])} figures against the H200's recordings)")
        for p in f["model_pairs"]:
            lines.append(f"    {p['figure']:<32} modeled {p['modeled_ms']:>9.4f} ms  "
                         f"recorded {p['recorded_ms']:>9.4f} ms")
    return "\n".join(lines)
