"""The learner's line of a traced call is found once per code location (Tracer.line_of) and then remembered: only a
faster way to read frame.f_lineno. A graded run of a program whose calls sit far into the file, at code locations
that repeat (a loop), share a line (two calls on one), or share a function called from two lines, reports the same
facts, placement map, per-line counts and modeled timeline as the same run reading frame.f_lineno every time."""

from __future__ import annotations

import json
import subprocess
import sys

from app.core.config import ROOT
from tests.harness.test_fused_path import _same, _timing_free

PADDING = "".join(f"pad_{i} = {i} * 2\n" for i in range(240))  # ~1,000 bytes of code before the program's calls

PROGRAM = PADDING + r'''
import torch
from torch import nn

torch.manual_seed(0)
device = "cuda"
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = nn.MSELoss()


def scaled(t, k):
    return t * k                                          # one code location, reached from two lines


X, Y = torch.randn(64, 4), torch.randn(64, 1)
for step in range(6):
    xb, yb = X[step * 8:(step + 1) * 8].to(device), Y[step * 8:(step + 1) * 8].to(device)
    out = scaled(model(xb), 2.0)
    loss = loss_fn(out, yb) + loss_fn(scaled(model(xb), 0.5), yb)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 2:
        print(step, loss.item(), out.cpu().sum().item())
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
if sys.argv[1] == "read":
    placement.Tracer.line_of = lambda self, frame: frame.f_lineno if frame is not None else None
payload = json.loads(json.dumps(Job(code=sys.stdin.read(), filename="main.py", mode="grade",
                                    grade={"exercise": "lines", "probe": None}).payload()))
report, status = grade.collect(payload, {"exercise": "lines", "probe": None}, show_traceback=lambda text: None)
print(json.dumps({"status": status, "report": report}, default=str))
'''


def graded(how: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", RUN, how], input=PROGRAM, capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def test_remembered_lines_report_what_reading_each_frames_line_reports():
    remembered, read = graded("remembered"), graded("read")
    assert remembered["status"] == read["status"] == 0
    report = remembered["report"]
    assert report["outcome"]["finished"], report["outcome"]
    lines = PROGRAM.splitlines()
    model_line = next(i for i, text in enumerate(lines, 1) if "loss_fn(scaled(model(xb)" in text)
    assert {e["line"] for e in report["trace"]["events"]["forward"]} == {model_line - 1, model_line}
    assert model_line > 240 and {e["line"] for e in report["trace"]["events"]["move"]} == {model_line - 2, len(lines)}
    _same(_timing_free(remembered["report"]), _timing_free(read["report"]))
