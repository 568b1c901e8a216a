"""The tracer's fused path for an ordinary op (Tracer.ordinary) is only a faster way through the chain: a graded
run of a program that takes it hundreds of times, and falls back from it in every way it can, reports the same
facts, memory figures and modeled timeline as the same run with every call sent down the whole chain."""

from __future__ import annotations

import json
import math
import subprocess
import sys

from app.core.config import ROOT

PROGRAM = r'''
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
device = "cuda"
X = torch.linspace(-1, 1, 64).unsqueeze(1)
loader = DataLoader(TensorDataset(X, 2 * X + 1), batch_size=16, shuffle=True)
model = nn.Sequential(nn.Linear(1, 8), nn.ReLU(), nn.Linear(8, 1)).to(device)
opt = torch.optim.Adam(model.parameters(), lr=0.01)
for epoch in range(3):
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        out = model(xb)
        err = ((out - yb) ** 2).mean() + 0 * out.sum()       # ordinary ops on marked, labelled tensors
        loss = nn.functional.mse_loss(out, yb)                # a loss function: the chain; its result marked
        scaled = (loss + err) * torch.tensor(0.5)             # the mark carried; a host scalar beside the GPU
        opt.zero_grad()
        scaled.backward()
        opt.step()
    print(epoch, loss.item(), scaled.dim(), out.view(-1)[:2].tolist())
y = torch.ones(4, device=device)
y.add_(1).mul_(torch.tensor(3.0))                             # in place, returning itself
v = y[1:3]
v.zero_()                                                     # in place on a view
parts = torch.split(y, 2)                                     # several results
print(y.sum().item(), [p.shape for p in parts], torch.cuda.memory_allocated(), torch.cuda.max_memory_allocated())
try:
    y + torch.ones(4)                                         # a host tensor beside a GPU one: the chain's error
except RuntimeError as exc:
    print("mixing:", exc)
with torch.autocast("cuda", dtype=torch.bfloat16):            # autocast casts: the chain
    print((y @ y).dtype, torch.relu(y).dtype)
torch.cuda.synchronize()
'''

RUN = r'''
import json, sys
from app.sandbox import startup
startup.warm_up()
import app.harness as harness
harness.load()
from app.harness import grade
from app.harness.tracing import placement
from app.runner.base import Job
if sys.argv[1] == "chain":
    placement.Tracer.ordinary = lambda self, *args: placement._FALL_BACK
calls = []
ordinary = placement.Tracer.ordinary
def counted(self, func, name, *rest):
    out = ordinary(self, func, name, *rest)
    calls.append(out is not placement._FALL_BACK)
    return out
placement.Tracer.ordinary = counted
payload = json.loads(json.dumps(Job(code=sys.stdin.read(), filename="main.py", mode="grade",
                                    grade={"exercise": "fused", "probe": None}).payload()))
report, status = grade.collect(payload, {"exercise": "fused", "probe": None}, show_traceback=lambda text: None)
print(json.dumps({"status": status, "fused": sum(calls), "report": report}, default=str))
'''


def graded(how: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", RUN, how], input=PROGRAM, capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def _timing_free(report: dict) -> dict:
    """The report without what differs between two runs of the same code: the run's real duration, objects' ids,
    and what the host's CPU time before the first device call moves (the events' start times, the modeled total,
    GPU idle)."""
    report["outcome"].pop("duration_ms")
    for events in report["trace"]["events"].values():
        for event in events:
            event.pop("id", None)
    timeline = report["timeline"]
    for key in ("modeled_ms", "gpu_idle_ms"):
        timeline.pop(key)
    timeline["events"] = [event[:1] + event[2:] for event in timeline["events"]]
    return report


def _same(a, b, path=""):
    assert type(a) is type(b), path
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for key in a:
            _same(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b), path
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def test_the_fused_path_reports_what_the_whole_chain_reports():
    fused, chain = graded("fused"), graded("chain")
    assert fused["status"] == chain["status"] == 0
    assert fused["fused"] > 200 and chain["fused"] == 0  # the path was taken, and then not at all
    assert fused["report"]["outcome"]["finished"], fused["report"]["outcome"]
    _same(_timing_free(fused["report"]), _timing_free(chain["report"]))
