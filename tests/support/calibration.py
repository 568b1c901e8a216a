"""The simulated clock against recordings of a real GPU: the program that times the simulated H200 as
tests/fidelity/calibrate.py timed the real one, and the comparison of its figures with the recording.

Used by the test (tests/fidelity/test_calibration.py: each figure within a factor of TOLERANCE) and by `make bench`
(bench/clock.py: `time_model_error`, the median relative error of the same figures).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from app import ROOT

RECORDED = ROOT / "tests" / "fidelity" / "calibration" / "h200.json"
MACHINE = "h200"
COURSE = [str(Path(sys.executable).with_name("course"))]
TOLERANCE = 2.0

# the recorded figures, timed on the simulated H200 as calibrate.py times them on the card (the matmul with a
# synchronize, the copies from a 256 MiB tensor); sizes of 256 are left out by `pairs`
PROGRAM = r'''
import json, time, torch
out = {"matmul": {}, "copy": {}}
for n in (1024, 4096):
    for dtype, tf32 in (("float32", False), ("float32", True), ("bfloat16", False), ("float16", False)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a = torch.randn(n, n, device="cuda", dtype=getattr(torch, dtype))
        c = a @ a
        torch.cuda.synchronize()
        t = time.perf_counter(); c = a @ a; torch.cuda.synchronize()
        out["matmul"][f"{n}-{dtype}-{tf32}"] = (time.perf_counter() - t) * 1e3
        del a, c
torch.backends.cuda.matmul.allow_tf32 = False
x = torch.empty(64 << 20)
for pinned in (False, True):
    src = x.pin_memory() if pinned else x
    t = time.perf_counter(); y = src.to("cuda"); torch.cuda.synchronize()
    out["copy"][f"h2d-{pinned}"] = (time.perf_counter() - t) * 1e3
    del y
print(json.dumps(out))
'''


def recorded() -> dict:
    return json.loads(RECORDED.read_text())


def run_modeled(workdir: Path) -> dict:
    """Run PROGRAM through `course run --machine h200` (the real sandbox, the simulated H200); its figures."""
    script = workdir / "calibration_main.py"
    script.write_text(PROGRAM)
    proc = subprocess.run([*COURSE, "run", "--machine", MACHINE, str(script)], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "COURSE_ENV": "development", "COURSE_SANDBOX_WALL_S": "120"})
    if proc.returncode != 0:
        raise RuntimeError(f"the calibration program failed on the simulated {MACHINE}:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def pairs(modeled: dict, real: dict) -> list[tuple[str, float, float]]:
    """(what, modeled ms, recorded ms) for each recorded figure the program models. Matmuls of 256 are left out:
    their recorded times are the timing loop's own launch overhead."""
    out = [(f"matmul {m['n']} {m['dtype']} tf32={m['tf32']}", modeled["matmul"][f"{m['n']}-{m['dtype']}-{m['tf32']}"],
            m["ms"]) for m in real["matmul"] if m["n"] >= 1024]
    out += [(f"copy h2d pinned={c['pinned']}", modeled["copy"][f"h2d-{c['pinned']}"], c["ms"])
            for c in real["copy"] if c["direction"] == "h2d"]
    return out


def outside_tolerance(compared: list[tuple[str, float, float]]) -> list[tuple[str, float, float]]:
    """The pairs whose modeled figure is not within a factor of TOLERANCE of the recorded one."""
    return [(what, round(ours, 4), real) for what, ours, real in compared
            if not 1 / TOLERANCE <= ours / real <= TOLERANCE]


def median_relative_error(compared: list[tuple[str, float, float]]) -> float:
    """The median of |modeled - recorded| / recorded over the pairs."""
    return statistics.median(abs(ours - real) / real for _what, ours, real in compared)
