"""Warm sandbox vs cold interpreter: latency of one small training job, throughput, idle child memory.

Measured in the same run: a cold `python -c SNIPPET` subprocess (interpreter start + import torch + one training
step) against the same SNIPPET submitted as a job to the warm, fully isolated sandbox (fork server -> pre-forked
child in its own namespaces, seccomp, cgroups, uid). Also: jobs per second with 2 and 8 jobs in flight, and the
USS (memory unique to a process) of an idle pre-forked child.

Run alone with `python -m bench sandbox`. Targets: warm p50 < 50 ms, >= 30x faster than cold, idle child < 30 MB.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil

from app.core.config import Settings
from app.runner import BlockingRunner, Job

RESULTS = Path(__file__).parent / "results"
SNIPPET = """\
import torch
model = torch.nn.Linear(10, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loss = torch.nn.functional.mse_loss(model(torch.randn(8, 10)), torch.randn(8, 2))
loss.backward()
opt.step()
print(round(loss.item(), 3))
"""
RUNS = 30  # per side; the issue asks for at least 30
WARMUP = 3
THROUGHPUT_JOBS = 40  # jobs per concurrency level
TARGETS = {"warm_p50_ms": 50.0, "speedup_x": 30.0, "idle_child_uss_mb": 30.0}


def pct(values: list[float], q: float) -> float:
    """Return the q-th percentile (nearest rank) of values."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def summary(values_s: list[float]) -> dict:
    ms = [v * 1000 for v in values_s]
    return {"runs": len(ms), "p50_ms": round(pct(ms, 50), 1), "p95_ms": round(pct(ms, 95), 1),
            "mean_ms": round(statistics.fmean(ms), 1)}


def measure_cold(runs: int = RUNS) -> dict:
    """Time a fresh interpreter running SNIPPET, the way a sandbox without a fork server would."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin"), "OMP_NUM_THREADS": "1"}
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", SNIPPET], check=True, capture_output=True, env=env)
        times.append(time.perf_counter() - started)
    return summary(times)


def settings(**kw) -> Settings:
    base = {"env": "test", "secret_key": "bench", "runner_queue_size": 1000}
    return Settings(**{**base, **kw})


def measure_warm(runner: BlockingRunner, runs: int = RUNS) -> dict:
    """Time SNIPPET submitted to the warm sandbox, end to end as the caller sees it (isolation included)."""
    job = Job(code=SNIPPET, filename="bench.py")
    times, inside = [], []
    for i in range(WARMUP + runs):
        time.sleep(0.05)  # let the pool refill, as it does between a learner's clicks
        started = time.perf_counter()
        result = runner.run(job)
        elapsed = time.perf_counter() - started
        assert result.status == "ok", result
        if i >= WARMUP:
            times.append(elapsed)
            inside.append(result.duration_ms / 1000)
    return {**summary(times), "server_side_p50_ms": summary(inside)["p50_ms"]}


def measure_throughput(concurrency: int, jobs: int = THROUGHPUT_JOBS) -> dict:
    """Run `jobs` copies of SNIPPET with `concurrency` in flight; return jobs per second."""
    with BlockingRunner(settings(runner_concurrency=concurrency, sandbox_prefork=concurrency)) as runner:
        runner.run(Job(code=SNIPPET))

        async def burst():
            import asyncio

            handles = [await runner.runner.submit(Job(code=SNIPPET)) for _ in range(jobs)]
            return await asyncio.gather(*(h.result() for h in handles))

        started = time.perf_counter()
        results = runner.call(burst())
        elapsed = time.perf_counter() - started
    ok = sum(r.status == "ok" for r in results)
    return {"concurrency": concurrency, "jobs": jobs, "ok": ok, "seconds": round(elapsed, 2),
            "jobs_per_s": round(jobs / elapsed, 1)}


def idle_child_uss(runner: BlockingRunner) -> dict:
    """Return the USS of the idle pre-forked children: the isolated job process, and its outer supervisor.

    The fork server's children are its zygote (app/sandbox/zygote.py), whose children are the outer supervisors,
    whose one child each is the job process waiting for code (app/sandbox/child.py). Before 2026-12-04 this read
    one level too high (the outer supervisors as the job processes, the zygote as their supervisor)."""
    time.sleep(1.0)  # the pool refills after the last job
    server = psutil.Process(runner.runner.server_pid)
    server_uss = server.memory_full_info().uss
    zygotes = server.children()
    outer = [o for z in zygotes for o in z.children()]
    job_procs = [g.memory_full_info().uss for o in outer for g in o.children()]
    mb = lambda b: round(b / 1e6, 1)  # noqa: E731
    return {"idle_children": len(job_procs), "idle_child_uss_mb": mb(max(job_procs, default=0)),
            "idle_outer_uss_mb": mb(max((o.memory_full_info().uss for o in outer), default=0)),
            "zygote_uss_mb": mb(max((z.memory_full_info().uss for z in zygotes), default=0)),
            "server_uss_mb": mb(server_uss), "server_rss_mb": mb(server.memory_info().rss)}


def run() -> dict:
    """Measure everything; write bench/results/sandbox.json; return the figures."""
    with BlockingRunner(settings(runner_concurrency=1, sandbox_prefork=2)) as runner:
        warm = measure_warm(runner)
        memory = idle_child_uss(runner)
        isolation = dict(runner.runner.info.get("layers", {}))
        mode = runner.runner.info.get("mode", "?")
    cold = measure_cold()
    throughput = {f"c{c}": measure_throughput(c) for c in (2, 8)}
    speedup = round(cold["p50_ms"] / warm["p50_ms"], 1)
    figures = {
        "cold": cold, "warm": warm, "speedup_x": speedup, "throughput": throughput, "memory": memory,
        "isolation_mode": mode,
        "isolation_layers_on": sum(isolation.values()), "isolation_layers_total": len(isolation),
        "targets": TARGETS,
        "met": {"warm_p50_ms": warm["p50_ms"] < TARGETS["warm_p50_ms"], "speedup_x": speedup >= TARGETS["speedup_x"],
                "idle_child_uss_mb": memory["idle_child_uss_mb"] < TARGETS["idle_child_uss_mb"]},
        "machine": {"cpus": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 2)},
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "sandbox.json").write_text(json.dumps(figures, indent=2) + "\n")
    return figures


def table(f: dict) -> str:
    """Render the figures as a table."""
    ok = lambda key: "met" if f["met"][key] else "MISSED"  # noqa: E731
    rows = [
        ("cold subprocess (import torch + step)", f"p50 {f['cold']['p50_ms']:.0f} ms",
         f"p95 {f['cold']['p95_ms']:.0f} ms"),
        ("warm sandbox job (isolated)", f"p50 {f['warm']['p50_ms']:.1f} ms", f"p95 {f['warm']['p95_ms']:.1f} ms"),
        ("  of which inside the server", f"p50 {f['warm']['server_side_p50_ms']:.1f} ms", ""),
        ("speed-up (cold p50 / warm p50)", f"{f['speedup_x']}x",
         f"target >= {TARGETS['speedup_x']:.0f}x: {ok('speedup_x')}"),
        ("warm p50 target", f"< {TARGETS['warm_p50_ms']:.0f} ms", ok("warm_p50_ms")),
        *[(f"throughput, {t['concurrency']} in flight", f"{t['jobs_per_s']} jobs/s", f"{t['ok']}/{t['jobs']} ok")
          for t in f["throughput"].values()],
        ("idle pre-forked child USS", f"{f['memory']['idle_child_uss_mb']} MB",
         f"target < {TARGETS['idle_child_uss_mb']:.0f} MB: {ok('idle_child_uss_mb')}"),
        ("  its outer supervisor (USS)", f"{f['memory']['idle_outer_uss_mb']} MB", ""),
        ("  the fork server (RSS, shared with children)", f"{f['memory']['server_rss_mb']} MB", ""),
        (f"isolation ({f['isolation_mode']}): layers on", f"{f['isolation_layers_on']}/{f['isolation_layers_total']}",
         f"{f['machine']['cpus']} CPUs, load {f['machine']['load_avg_1m']}"),
    ]
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"  {a:<{width}}  {b:<18} {c}" for a, b, c in rows)


if __name__ == "__main__":
    print(table(run()))
