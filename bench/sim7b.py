"""sim_7b_step_s: the wall time of one training step of a 7B-parameter bf16 model (416 Linear(4096, 4096)) with
AdamW on one simulated H100, as a sandbox job with the default 1 GiB of job memory (tensors that large are kept
without values, app/harness/machine/dataless.py), beside a plain CPU run (no simulation) of a 100M-parameter
model's step (6 Linear(4096, 4096), float32, AdamW) in the same sandbox with 4 GiB. Also the 7B step's peak as the
simulated card reports it. Writes bench/results/sim7b.json.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from app.core.config import Settings
from app.harness.contract import DEFAULT_HOST, PLAIN_CPU
from app.runner import BlockingRunner, Job

RESULTS = Path(__file__).parent / "results"
STEP = """
import time, torch, torch.nn as nn
start = time.perf_counter()
device = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Sequential(*[nn.Linear(4096, 4096, bias=False, device=device, dtype=torch.{dtype}) for _ in range({n})])
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x = torch.randn(8, 512, 4096, device=device, dtype=torch.{dtype})
model(x).float().pow(2).mean().backward()
opt.step()
opt.zero_grad(set_to_none=True)
peak = torch.cuda.max_memory_allocated() if device == "cuda" else 0
print(time.perf_counter() - start, peak)
"""


def _step(runner, host, dtype: str, layers: int) -> tuple[float, float, int]:
    """(job wall s, in-program s, peak bytes) of one step."""
    started = time.perf_counter()
    result = runner.run(Job(code=STEP.format(dtype=dtype, n=layers), filename="step.py", host=host))
    wall = time.perf_counter() - started
    if result.status != "ok":
        raise RuntimeError(f"the step failed: {result.status} {result.message} {result.stderr[-500:]}")
    inside, peak = result.stdout.split()
    return wall, float(inside), int(peak)


def run() -> dict:
    """Time both steps; return the figures (and write them)."""
    settings = Settings(env="test", secret_key="bench", sandbox_wall_s=120, sandbox_cpu_s=120)
    with BlockingRunner(settings) as runner:
        sim_wall, sim_inside, peak = _step(runner, DEFAULT_HOST, "bfloat16", 416)
    plain = Settings(env="test", secret_key="bench", sandbox_wall_s=120, sandbox_cpu_s=120,
                     sandbox_memory_bytes=4 << 30)
    with BlockingRunner(plain) as runner:
        cpu_wall, cpu_inside, _ = _step(runner, PLAIN_CPU, "float32", 6)
    figures = {"sim_7b_step_s": round(sim_wall, 2), "sim_7b_in_program_s": round(sim_inside, 2),
               "sim_7b_peak_gib": round(peak / (1 << 30), 2), "cpu_100m_step_s": round(cpu_wall, 2),
               "cpu_100m_in_program_s": round(cpu_inside, 2)}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "sim7b.json").write_text(json.dumps(figures, indent=2) + "\n")
    return figures
