"""A module's move is recorded with the bytes of its parameters (Hooks.note_module_move); summing them is the
tracer's own bookkeeping, not the learner's: a graded run of `model = Net().to("cuda")` reports the move and its
bytes on that line, and no numel/element_size calls there, while the same calls made by the learner's own line are
counted as before."""

from __future__ import annotations

import json
import subprocess
import sys

from app.core.config import ROOT
from tests.harness.test_line_cache import RUN

PROGRAM = r'''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))

    def forward(self, x):
        return self.body(x)


model = Net().to("cuda")
size = sum(p.numel() * p.element_size() for p in model.parameters())
print(size, model(torch.ones(2, 4, device="cuda")).sum().item())
'''
MOVE_LINE = PROGRAM.splitlines().index('model = Net().to("cuda")') + 1
# Linear(4, 8) and Linear(8, 1): 4*8 + 8 + 8*1 + 1 = 49 float32 parameters of 4 bytes
PARAM_BYTES = 49 * 4


def test_a_module_moves_bookkeeping_is_not_the_learners_ops():
    proc = subprocess.run([sys.executable, "-c", RUN, "remembered"], input=PROGRAM, capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    graded = json.loads(proc.stdout.splitlines()[-1])
    assert graded["status"] == 0
    trace = graded["report"]["trace"]
    assert graded["report"]["outcome"]["finished"], graded["report"]["outcome"]

    on_move_line = {op["op"] for op in trace["ops"] if op["line"] == MOVE_LINE}
    assert not on_move_line & {"numel", "element_size"}, trace["ops"]
    # the learner's own calls, one line down, are still counted: one per parameter (4 tensors)
    counted = {op["op"]: op["calls"] for op in trace["ops"] if op["line"] == MOVE_LINE + 1}
    assert counted.get("numel") == counted.get("element_size") == 4, trace["ops"]

    moves = trace["events"]["module_move"]
    assert [(m["line"], m["module"], m["devices"]) for m in moves] == [(MOVE_LINE, "Net", ["cuda:0"])]
    entry = next(e for e in trace["lines"] if e["line"] == MOVE_LINE)
    assert (entry["event"], entry["bytes"], entry["module"], entry["ops"]) == ("to_device", PARAM_BYTES, "Net", ["to"])
