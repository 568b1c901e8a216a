"""The simulated clock against recordings of a real GPU (tests/fidelity/calibration/h200.json, recorded by
scripts/gpu-check on an H200), through the real sandbox on the simulated H200.

Tolerance: a factor of 2 either way. The model is a roofline with fixed efficiencies (docs/grading.md, "The
simulated clock"): it cannot know cuBLAS's kernel choice per shape or the driver's staging, and the course needs
the right order of magnitude and the right ratios (GPU against host, pinned against pageable, fp32 against bf16),
not the last 10%. Sizes of 256 are left out: their recorded times are the timing loop's own launch overhead.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

RECORDED = Path(__file__).parent / "calibration" / "h200.json"
COURSE = [str(Path(sys.executable).with_name("course"))]
TOLERANCE = 2.0

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


@pytest.mark.skipif(not RECORDED.exists(), reason="no recording of a real H200 yet")
def test_the_modeled_h200_is_within_a_factor_of_two_of_the_recorded_one(tmp_path: Path):
    recorded = json.loads(RECORDED.read_text())
    script = tmp_path / "main.py"
    script.write_text(PROGRAM)
    proc = subprocess.run([*COURSE, "run", "--machine", "h200", str(script)], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "COURSE_ENV": "development", "COURSE_SANDBOX_WALL_S": "120"})
    assert proc.returncode == 0, proc.stderr
    modeled = json.loads(proc.stdout.strip().splitlines()[-1])
    pairs = [(f"matmul {m['n']} {m['dtype']} tf32={m['tf32']}", modeled["matmul"][f"{m['n']}-{m['dtype']}-{m['tf32']}"],
              m["ms"]) for m in recorded["matmul"] if m["n"] >= 1024]
    pairs += [(f"copy h2d pinned={c['pinned']}", modeled["copy"][f"h2d-{c['pinned']}"], c["ms"])
              for c in recorded["copy"] if c["direction"] == "h2d"]
    off = [(what, round(ours, 4), real) for what, ours, real in pairs
           if not 1 / TOLERANCE <= ours / real <= TOLERANCE]
    assert not off, off
