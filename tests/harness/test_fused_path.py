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
        loss = nn.functional.mse_loss(out, yb)                # a loss function: its fact; its result marked
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

# what both scripts start with: a process warmed as the fork server warms itself, the harness loaded, and with
# "chain" every ordinary op sent down the whole chain (the fused path refusing each); `ordinary` is the path taken
PREAMBLE = r'''
import contextlib, io, json, linecache, sys
from app.sandbox import startup
startup.warm_up()
import app.harness as harness
harness.load()
from app.harness.tracing import placement
if sys.argv[1] == "chain":
    placement.Tracer.ordinary = lambda self, *args: placement._FALL_BACK
ordinary = placement.Tracer.ordinary
'''

RUN = PREAMBLE + r'''
from app.harness import grade
from app.runner.base import Job
calls, losses = [], []
def counted(self, func, name, *rest):
    out = ordinary(self, func, name, *rest)
    calls.append(out is not placement._FALL_BACK)
    if name in placement._LOSS_FUNCTIONS and out is not placement._FALL_BACK:
        losses.append(name)
    return out
placement.Tracer.ordinary = counted
payload = json.loads(json.dumps(Job(code=sys.stdin.read(), filename="main.py", mode="grade",
                                    grade={"exercise": "fused", "probe": None}).payload()))
report, status = grade.collect(payload, {"exercise": "fused", "probe": None}, show_traceback=lambda text: None)
print(json.dumps({"status": status, "fused": sum(calls), "losses": losses, "report": report}, default=str))
'''


def _last_json(script: str, how: str) -> dict:
    """Run script on PROGRAM in a fresh process; return the JSON of its last line."""
    proc = subprocess.run([sys.executable, "-c", script, how], input=PROGRAM, capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def graded(how: str) -> dict:
    return _last_json(RUN, how)


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
    # the loss function too, its fact kept there (the report's loss_fn events, compared below)
    assert fused["losses"] == ["mse_loss"] * 12 and len(fused["report"]["trace"]["events"]["loss_fn"]) == 12
    assert fused["report"]["outcome"]["finished"], fused["report"]["outcome"]
    _same(_timing_free(fused["report"]), _timing_free(chain["report"]))


RUN_JOB = PREAMBLE + r'''
import torch
from app.harness import plain, session
from app.harness.contract import DEFAULT_HOST
from app.harness.machine.clock import CLOCK
losses = []
def counted(self, func, name, *rest):
    out = ordinary(self, func, name, *rest)
    if name in placement._LOSS_FUNCTIONS and out is not placement._FALL_BACK:
        losses.append(bool(out.__dict__.get("_pt_loss")))
    return out
placement.Tracer.ordinary = counted
code = sys.stdin.read()
linecache.cache["main.py"] = (len(code), None, code.splitlines(True), "main.py")
session.prepare({"host": DEFAULT_HOST.payload(), "nproc": 1}, "main.py", grading=False)
printed = io.StringIO()
with contextlib.redirect_stdout(printed):
    status = plain.run_plain(code, "main.py")
work = [(row, name, line, kind) + ((seconds,) if kind in ("kernel", "copy") else ())
        for row, name, _, seconds, line, kind in CLOCK.trace]
print(json.dumps({"status": status, "printed": printed.getvalue(), "losses": losses, "work": work,
                  "memory": torch.cuda.memory_stats(), "by_line": sorted(CLOCK.by_line)}, default=str))
'''


def run_job(how: str) -> dict:
    return _last_json(RUN_JOB, how)


def test_a_run_whose_facts_nobody_reads_takes_loss_functions_on_the_fused_path_with_the_same_outcome():
    """A `run` job's loss functions (no facts to record) take the fused path, their results marked as the loss as
    the chain marks them: the same output, device work (kernels, copies, their lines) and memory figures."""
    fused, chain = run_job("fused"), run_job("chain")
    assert fused["status"] == chain["status"] == 0
    assert fused["losses"] == [True] * 12 and chain["losses"] == []  # mse_loss of 3 epochs x 4 batches, marked
    assert fused["printed"] == chain["printed"]
    assert fused["work"] == chain["work"]
    assert fused["memory"] == chain["memory"]
    assert fused["by_line"] == chain["by_line"]
