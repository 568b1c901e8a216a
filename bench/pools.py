"""The two pools in CPU mode, in the same run: warm job latency of the default pool (children isolate, then wait)
and of the spawn-then-isolate pool that GPU slots use (children warm up, then isolate, one job each), and what
the spawn pool's children would cost to prepare as fresh interpreters (exec) instead of forks of the server.

Run alone with `python -m bench pools`. No target: the figures explain a design choice (docs/architecture.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from app import ROOT
from app.runner import BlockingRunner
from bench.sandbox import SNIPPET, measure_warm, pct, settings

RESULTS = Path(__file__).parent / "results"
EXEC_RUNS = 5
# what an exec'd child would do before it could isolate: a fresh interpreter importing the harness (and torch)
# and running the fork server's warm-up, which a forked child inherits instead
EXEC_CHILD = "import app.harness; app.harness.load(); from app.sandbox import startup; startup.warm_up()"


def measure_exec_prepare(runs: int = EXEC_RUNS) -> dict:
    """Time a fresh interpreter's preparation (imports + warm-up), the part a forked child skips."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin"), "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", EXEC_CHILD], check=True, capture_output=True, env=env, cwd=ROOT)
        times.append((time.perf_counter() - started) * 1000)
    return {"runs": runs, "p50_ms": round(pct(times, 50), 1)}


def run() -> dict:
    """Measure both pools and the exec alternative; write bench/results/pools.json."""
    figures = {}
    for pool in ("prefork", "spawn"):
        with BlockingRunner(settings(runner_concurrency=1, sandbox_prefork=2, sandbox_pool=pool)) as runner:
            runner.run_code(SNIPPET)
            figures[pool] = measure_warm(runner)
    figures["exec_child_prepare"] = measure_exec_prepare()
    figures["machine"] = {"cpus": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 2)}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "pools.json").write_text(json.dumps(figures, indent=2) + "\n")
    return figures


def table(f: dict) -> str:
    """Render the figures as a table."""
    rows = [("prefork pool: warm job (isolated)", f"p50 {f['prefork']['p50_ms']:.1f} ms",
             f"p95 {f['prefork']['p95_ms']:.1f} ms"),
            ("spawn pool, CPU mode: warm job", f"p50 {f['spawn']['p50_ms']:.1f} ms",
             f"p95 {f['spawn']['p95_ms']:.1f} ms"),
            ("an exec'd child's preparation (not taken)", f"p50 {f['exec_child_prepare']['p50_ms']:.0f} ms",
             f"{f['machine']['cpus']} CPUs, load {f['machine']['load_avg_1m']}")]
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"  {a:<{width}}  {b:<18} {c}" for a, b, c in rows)
