"""Grading overhead: `course grade training-loop solution.py` on a warm sandbox, against the same file run plainly.

Both sides use one warm LocalRunner (fork server up, pool refilled between runs, as between a learner's clicks):
- plain: the solution as a `run` job on the plain CPU (PLAIN_CPU: no tracer, no simulated GPU), end to end;
- graded: `grade_submission` of the solution (simulated GPU, tracer, probe, report, checks), end to end;
the overhead is graded minus plain, p50 over RUNS runs each. Also measured: the same `run` job on the default
simulated host (what `course run` does since issue 12), to show what the simulation alone costs; and, in this
process with no sandbox, what seeing every torch call costs at all: the solution executed warm, plainly and under a
TorchFunctionMode that only hands each call on (`interception_floor`), the floor of any tracer built on a mode.
Writes bench/results/grading.json.
"""

from __future__ import annotations

import contextlib
import io
import json
import statistics
import time
from pathlib import Path

from app.content.exercises import load_exercise
from app.core.config import ROOT, Settings
from app.grading import grade_submission
from app.harness.contract import PLAIN_CPU
from app.runner import BlockingRunner, Job

RESULTS = Path(__file__).parent / "results"
RUNS = 30  # per side, as issue 5 asks
WARMUP = 3
PAUSE_S = 0.05  # between runs: the pool refills, as it does between a learner's clicks


def pct(values: list[float], q: float) -> float:
    """Return the q-th percentile (nearest rank) of values."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def _timed(call, runs: int) -> list[float]:
    times = []
    for i in range(WARMUP + runs):
        time.sleep(PAUSE_S)
        started = time.perf_counter()
        call()
        if i >= WARMUP:
            times.append((time.perf_counter() - started) * 1000)
    return times


def interception_floor(code: str, runs: int) -> dict:
    """What a TorchFunctionMode that does nothing but hand each call on adds to the program, in this process (warm,
    output discarded, CPU time of this thread): the least any tracer that sees every torch call can cost."""
    from torch.overrides import TorchFunctionMode

    class HandOn(TorchFunctionMode):
        calls = 0

        def __torch_function__(self, func, types, args=(), kwargs=None):
            HandOn.calls += 1
            return func(*args, **(kwargs or {}))

    compiled = compile(code, "main.py", "exec")

    def once(mode) -> float:
        with contextlib.redirect_stdout(io.StringIO()), (mode or contextlib.nullcontext()):
            started = time.thread_time()
            exec(compiled, {"__name__": "__main__"})
            return (time.thread_time() - started) * 1000

    plain, handed = [], []
    for i in range(WARMUP + runs):  # alternated, so a slower stretch of the machine falls on both
        p, h = once(None), once(HandOn())
        if i >= WARMUP:
            plain.append(p)
            handed.append(h)
    calls = HandOn.calls // (WARMUP + runs)  # the same program each run: the same calls
    return {"inprocess_plain_p50_ms": round(pct(plain, 50), 2),
            "inprocess_hand_on_mode_p50_ms": round(pct(handed, 50), 2),
            "hand_on_mode_calls": calls,
            "hand_on_mode_us_per_call": round((pct(handed, 50) - pct(plain, 50)) * 1000 / max(calls, 1), 2)}


def run(runs: int = RUNS) -> dict:
    """Measure plain and graded runs of training-loop's solution; write bench/results/grading.json."""
    exercise = load_exercise(ROOT / "exercises" / "training-loop")
    settings = Settings(env="test", secret_key="bench", runner_queue_size=1000)
    statuses = set()
    with BlockingRunner(settings) as runner:
        plain = _timed(lambda: statuses.add(runner.run(Job(code=exercise.solution, filename="main.py",
                                                           host=PLAIN_CPU)).status), runs)
        simulated = _timed(lambda: statuses.add(runner.run(Job(code=exercise.solution, filename="main.py")).status),
                           runs)

        def graded_once():
            verdict = runner.call(grade_submission(exercise, exercise.solution, runner.runner))
            statuses.add(verdict.status)

        graded = _timed(graded_once, runs)
    overhead = [g - p for g, p in zip(sorted(graded), sorted(plain))]
    figures = {
        "runs": runs,
        "plain_job_p50_ms": round(pct(plain, 50), 1), "plain_job_p95_ms": round(pct(plain, 95), 1),
        "simulated_run_job_p50_ms": round(pct(simulated, 50), 1),
        "grade_training_loop_p50_ms": round(pct(graded, 50), 1),
        "grade_training_loop_p95_ms": round(pct(graded, 95), 1),
        "grade_training_loop_mean_ms": round(statistics.fmean(graded), 1),
        "grading_overhead_p50_ms": round(pct(graded, 50) - pct(plain, 50), 1),
        "grading_overhead_p95_ms": round(pct(overhead, 95), 1),
        "statuses": sorted(statuses),
        **interception_floor(exercise.solution, runs),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "grading.json").write_text(json.dumps(figures, indent=2) + "\n")
    return figures


def table(f: dict) -> str:
    """Print the figures as a small table."""
    return "\n".join([
        f"  training-loop solution, {f['runs']} runs each, warm sandbox    p50 ms   p95 ms",
        f"  plain run job (no tracer)                               {f['plain_job_p50_ms']:>7}  "
        f"{f['plain_job_p95_ms']:>7}",
        f"  course grade (tracer + probe + checks)                  {f['grade_training_loop_p50_ms']:>7}  "
        f"{f['grade_training_loop_p95_ms']:>7}",
        f"  grading overhead                                        {f['grading_overhead_p50_ms']:>7}  "
        f"{f['grading_overhead_p95_ms']:>7}",
        f"  verdict statuses seen: {', '.join(f['statuses'])}",
        f"  in this process, warm: plain {f['inprocess_plain_p50_ms']} ms, under a mode that only hands each call on "
        f"{f['inprocess_hand_on_mode_p50_ms']} ms ({f['hand_on_mode_calls']} calls, "
        f"{f['hand_on_mode_us_per_call']} us each)",
    ])
