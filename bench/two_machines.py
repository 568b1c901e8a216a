"""Two machines, live: HTTP submit to verdict for `two-machines`, beside a cold torchrun of the same solution.

What a learner waits for on lesson 3 after pressing Run on `two-machines`: POST
/api/exercises/two-machines/submissions, then the SSE stream to its `verdict` event, against the real site under
uvicorn (production mode, its own SQLite file, the embedded sandbox runner). The job runs four ranks as `torchrun
--nnodes=2 --nproc-per-node=2 --rdzv-backend=c10d` on each of two simulated machines would, forked warm (each
machine's by its machine keeper, app/sandbox/nodes.py), on two simulated GPUs per machine, graded rank by rank.

The baseline, in the same run: the real torchrun, cold, twice at once, as two machines start it (`python -m
torch.distributed.run --nnodes=2 --nproc-per-node=2 --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:PORT`: two
agents meeting at a c10d rendezvous, four ranks), on the unchanged solution. Each rank is a fresh interpreter that
installs the same simulated host a sandbox job gets (bench/_ddp_rank.py), as bench/ddp.py's baseline does.

Run alone with `python -m bench two_machines`; `make bench` runs it with the others. Targets: submit p50 < 2 s and
at least 10x faster than the cold torchrun.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from app import ROOT
from app.content.exercises import load_exercise
from app.grading.grader import build_job
from bench.live import learner_client, percentile, submission_figures, submit_and_wait
from tests.support.servers import site_server

EXERCISE = "two-machines"
RUNS = 10
WARMUP = 2
# a cold run starts two agents and four ranks, six interpreters that each import torch: three give a median
COLD_RUNS = 3
TARGETS = {"two_machines_submit_p50_ms": 2000.0, "speedup_x": 10.0}
EPOCHS = 5  # the solution's; global rank 0 prints "epoch 4: ..." last
TEARDOWN_ABORT = "terminate called without an active exception"
RANK_ENTRY = Path(__file__).parent / "_ddp_rank.py"
RESULTS = Path(__file__).parent / "results" / "two_machines.json"


def measure_site(code: str, runs: int = RUNS) -> dict:
    """Time `runs` submissions of code to two-machines through the real site (after a warm-up); all must pass."""
    with tempfile.TemporaryDirectory() as tmp, site_server(
            Path(tmp), until_ready=True, COURSE_SUBMISSION_RATE_LIMIT="10000/minute",
            COURSE_SUBMISSION_ADDRESS_RATE_LIMIT="10000/minute") as (base, _proc):
        with learner_client(base) as client:
            for _ in range(WARMUP):
                submit_and_wait(client, code, EXERCISE)
            samples = [submit_and_wait(client, code, EXERCISE) for _ in range(runs)]
    failed = [v for _ms, v, _n in samples if v["status"] != "passed"]
    if failed:
        raise RuntimeError(f"{len(failed)} of {runs} submissions of the solution did not pass: {failed[0]}")
    return submission_figures(samples, "two_machines_submit")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cold_torchrun(code: str, host: dict, runs: int = COLD_RUNS) -> tuple[list[float], int]:
    """Time two cold `torchrun --nnodes=2` agents started together on the solution, runs times; return the times
    (ms) and how many runs aborted in teardown after training (as bench/ddp.py counts them); any other failure
    raises."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin"), "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    times, aborts = [], 0
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            solution = Path(tmp) / "solution.py"
            solution.write_text(code, encoding="utf-8")
            command = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=2",
                       "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{_free_port()}", "--rdzv-id=bench",
                       str(RANK_ENTRY), json.dumps(host), str(solution)]
            start = time.perf_counter()
            agents = [subprocess.Popen(command, cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       text=True) for _ in range(2)]
            outputs = [agent.communicate() for agent in agents]
            times.append((time.perf_counter() - start) * 1000)
            trained = any(f"epoch {EPOCHS - 1}:" in out for out, _err in outputs) and (Path(tmp) / "model.pt").exists()
        codes = [agent.returncode for agent in agents]
        if any(codes) and trained and any(TEARDOWN_ABORT in err for _out, err in outputs):
            aborts += 1
        elif any(codes) or not trained:
            raise RuntimeError(f"torchrun --nnodes=2 exited {codes}:\n{outputs[0][1][-2000:]}\n{outputs[1][1][-2000:]}")
    return times, aborts


def run() -> dict:
    """Measure the two-machines submission path and its cold torchrun baseline; return the figures (also JSON)."""
    exercise = load_exercise(ROOT / "exercises" / EXERCISE)
    job, _nonce = build_job(exercise, exercise.solution)
    figures = measure_site(exercise.solution)
    cold, aborts = cold_torchrun(exercise.solution, job.host.payload())
    figures.update({"two_machines_cold_torchrun_runs": COLD_RUNS,
                    "two_machines_cold_torchrun_p50_ms": round(percentile(cold, 50), 1),
                    "two_machines_cold_torchrun_teardown_aborts": aborts})
    p50 = figures["two_machines_submit_p50_ms"]
    figures["two_machines_submit_speedup_vs_cold"] = round(figures["two_machines_cold_torchrun_p50_ms"] / p50, 1)
    figures["targets"] = TARGETS
    figures["met"] = {"two_machines_submit_p50_ms": p50 < TARGETS["two_machines_submit_p50_ms"],
                      "speedup_x": figures["two_machines_submit_speedup_vs_cold"] >= TARGETS["speedup_x"]}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n")
    return figures


def table(f: dict) -> str:
    """Render the figures as a small table."""
    ok = lambda key: "met" if f["met"][key] else "NOT met"  # noqa: E731
    return "\n".join([
        f"  HTTP submit -> verdict, {EXERCISE}, 2 machines x 2 ranks (p50 / p95)  "
        f"{f['two_machines_submit_p50_ms']:.1f} / {f['two_machines_submit_p95_ms']:.1f} ms  "
        f"(< {TARGETS['two_machines_submit_p50_ms']:.0f} ms: {ok('two_machines_submit_p50_ms')})",
        f"    of which the sandbox job (p50)                                  "
        f"{f['two_machines_submit_sandbox_p50_ms']:.1f} ms",
        f"  cold torchrun --nnodes=2 --nproc-per-node=2, two agents (p50)        "
        f"{f['two_machines_cold_torchrun_p50_ms']:.0f} ms",
        f"  speed-up vs cold torchrun                                           "
        f"{f['two_machines_submit_speedup_vs_cold']}x  (>= {TARGETS['speedup_x']:.0f}x: {ok('speedup_x')})",
    ])


if __name__ == "__main__":
    print(table(run()))
