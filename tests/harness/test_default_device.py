"""A default device on the simulated GPU, through the real sandbox (`course run`): `torch.set_default_device("cuda")`
and `with torch.device("cuda:1"):` send factories called without a device (torch.randn, torch.tensor, nn.Linear's
parameters) to the simulated GPU, counted in its memory, as on a real CUDA host (torch/utils/_device.py's
DeviceContext fills `device=` for the calls in `_device_constructors()`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

COURSE = [str(Path(sys.executable).with_name("course"))]

PROGRAM = """
import torch
torch.set_default_device("cuda")
print(torch.get_default_device())
x = torch.randn(1024, 1024)
print(x.device, x.is_cuda, torch.cuda.memory_allocated())
lin = torch.nn.Linear(4, 4)
print(torch.tensor([1.0, 2.0]).device, lin.weight.device, lin.bias.device, lin(torch.ones(2, 4)).device)
print(torch.zeros(3, device="cpu").device)
torch.set_default_device("cpu")
print(torch.zeros(1).device, torch.get_default_device())
with torch.device("cuda:1"):
    y = torch.zeros(256)
    print(torch.get_default_device())
print(y.device, torch.cuda.memory_allocated(1), torch.ones(1).device)
"""


def test_set_default_device_and_a_device_context_place_factories_on_the_simulated_gpus(tmp_path: Path):
    script = tmp_path / "main.py"
    script.write_text(PROGRAM)
    proc = subprocess.run([*COURSE, "run", "--machine", "h100", "--gpus", "2", str(script)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "COURSE_ENV": "development"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "cuda:0",
        "cuda:0 True 4194304",  # 1024 x 1024 float32 = 4 MiB, a multiple of the allocator's 512-byte rounding
        "cuda:0 cuda:0 cuda:0 cuda:0",
        "cpu",  # an explicit device still wins
        "cpu cpu",
        "cuda:1",
        "cuda:1 1024 cpu",  # 256 float32 on GPU 1; outside the block, main memory again
    ]
