"""A simulated GPU with a size, through the real sandbox (`course run`): the caching allocator's figures,
torch's own out-of-memory error before any host memory is touched, and tensors at a real card's scale kept
without values in the job's 1 GiB. Expected figures are derived from c10/cuda/CUDACachingAllocator.cpp (no GPU
was lent to record them; scripts/gpu-check records them where one is)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import side_by_side

COURSE = [str(Path(sys.executable).with_name("course"))]
MiB, GiB = 1 << 20, 1 << 30
H100_TOTAL, T4_TOTAL = 81089 * MiB, 15095 * MiB  # app/harness/machine/machines/{h100,t4}.json
CONTEXT = 512 * MiB  # harness/memory.py CONTEXT_BYTES


def run(tmp_path: Path, code: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    script = tmp_path / "main.py"
    script.write_text(code)
    return subprocess.run([*COURSE, "run", *args, str(script)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COURSE_ENV": "development", **env})


def oom_text(tried: str, total: str, free: str, in_use: str, allocated: str, unallocated: str) -> str:
    return (f"CUDA out of memory. Tried to allocate {tried}. GPU 0 has a total capacity of {total} of which {free} "
            f"is free. Including non-PyTorch memory, this process has {in_use} memory in use. Of the allocated "
            f"memory {allocated} is allocated by PyTorch, and {unallocated} is reserved by PyTorch but unallocated. "
            "If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
            "to avoid fragmentation.  See documentation for Memory Management  "
            "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")


CATCH = """
import torch
x = torch.ones(1024, device="cuda")  # 4 KiB: a 2 MiB small-pool segment
try:
    torch.empty({n}, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError as exc:
    print(type(exc).__name__, isinstance(exc, RuntimeError), torch.cuda.OutOfMemoryError is torch.OutOfMemoryError)
    print(exc)
print(x.sum().item(), torch.cuda.memory_allocated(), torch.cuda.memory_stats()["num_ooms"])
"""


def test_out_of_memory_on_h100_and_t4_is_torchs_own_and_can_be_caught(tmp_path: Path):
    proc = run(tmp_path, CATCH.format(n=100 * GiB))  # far past the 1 GiB sandbox: raised before host memory
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "OutOfMemoryError True True"
    free = H100_TOTAL - CONTEXT - 2 * MiB
    assert lines[1] == oom_text("100.00 GiB", "79.19 GiB", f"{free / GiB:.2f} GiB", "514.00 MiB", "4.00 KiB",
                                "2.00 MiB")
    assert lines[2] == "1024.0 4096 1"
    t4 = run(tmp_path, CATCH.format(n=16 * GiB), "--machine", "t4")
    assert t4.returncode == 0, t4.stderr
    free = T4_TOTAL - CONTEXT - 2 * MiB
    assert t4.stdout.splitlines()[1] == oom_text("16.00 GiB", "14.74 GiB", f"{free / GiB:.2f} GiB", "514.00 MiB",
                                                 "4.00 KiB", "2.00 MiB")


def test_an_uncaught_out_of_memory_names_the_line(tmp_path: Path):
    proc = run(tmp_path, "import torch\nkeep = torch.empty(14 * 2**30, dtype=torch.uint8, device='cuda')\n"
                         "more = torch.empty(2**30, dtype=torch.uint8, device='cuda')\n", "--machine", "t4")
    assert proc.returncode == 1
    assert 'line 3, in <module>' in proc.stderr and "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate " \
        "1024.00 MiB. GPU 0 has a total capacity of 14.74 GiB" in proc.stderr  # format_size: <= 1 GiB in MiB


SEQUENCE = """
import json, torch
u8 = torch.uint8
out = {}
a = torch.empty(1000, dtype=u8, device="cuda")          # 1024 B block, 2 MiB small segment
b = torch.empty(3 << 20, dtype=u8, device="cuda")       # 3 MiB from a new 20 MiB large segment, split
c = torch.empty((12 << 20) + 1, dtype=u8, device="cuda")  # 12 MiB + 512 B: best fit is the 17 MiB rest of b's
d = torch.empty(5 << 20, dtype=u8, device="cuda")       # 5 MiB: the 5 MiB - 512 B left is too small: a new 20 MiB
out["after_d"] = [torch.cuda.memory_allocated(), torch.cuda.memory_reserved()]
del b, d                                                # d's segment is whole and free again: cached
out["after_free"] = [torch.cuda.memory_allocated(), torch.cuda.memory_reserved(), torch.cuda.max_memory_allocated()]
torch.cuda.empty_cache()                                # gives it back; c's (b's) segment is split: it stays
s = torch.cuda.memory_stats()
out["after_empty"] = [torch.cuda.memory_reserved(), s["num_device_alloc"], s["num_device_free"],
                      s["segment.all.current"], s["allocation.all.current"], s["reserved_bytes.small_pool.current"]]
torch.cuda.reset_peak_memory_stats()
out["peak_reset"] = torch.cuda.max_memory_allocated()
out["mem_get_info"] = list(torch.cuda.mem_get_info())
out["summary"] = "PyTorch CUDA memory summary, device ID 0" in torch.cuda.memory_summary()
print(json.dumps(out))
"""


def test_allocator_figures_after_allocations_and_frees(tmp_path: Path):
    proc = run(tmp_path, SEQUENCE)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    c = (12 << 20) + 512
    assert out["after_d"] == [1024 + (3 << 20) + c + (5 << 20), (2 + 20 + 20) * MiB]
    assert out["after_free"] == [1024 + c, 42 * MiB, 1024 + (3 << 20) + c + (5 << 20)]
    assert out["after_empty"] == [22 * MiB, 3, 1, 2, 2, 2 * MiB]
    assert out["peak_reset"] == 1024 + c
    assert out["mem_get_info"] == [H100_TOTAL - CONTEXT - 22 * MiB, H100_TOTAL]
    assert out["summary"] is True


def test_expandable_segments_is_accepted(tmp_path: Path):
    code = ("import torch\nx = torch.empty(3 << 20, dtype=torch.uint8, device='cuda')\n"
            "y = torch.empty(30 << 20, dtype=torch.uint8, device='cuda')\nprint(torch.cuda.memory_reserved() >> 20)\n")
    # each run in a folder of its own: they run side by side
    folders = [tmp_path / name for name in ("plain", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")]
    for folder in folders:
        folder.mkdir()
    plain, *expandable = side_by_side(
        lambda: run(folders[0], code),
        # set by the program before its first GPU tensor, as torch reads it when the allocator starts
        *(lambda folder=folder: run(folder, f"import os\nos.environ[{folder.name!r}] = 'expandable_segments:True'\n"
                                            + code) for folder in folders[1:]))
    assert plain.stdout == "50\n"  # a 20 MiB segment + one of 30 MiB (rounded to 2 MiB)
    for proc in expandable:  # pages of 20 MiB in the large pool
        assert proc.returncode == 0 and proc.stdout == "60\n", proc.stderr  # 20 + 40


DATALESS = """
import torch
big = torch.randn(8192, 8192, device="cuda")   # 256 MiB: kept without values
small = torch.ones(4, device="cuda") * 2       # keeps its values
print(big.shape, big.dtype, big.device, torch.cuda.memory_allocated() >> 20, small.sum().item())
y = (big @ big).relu().sum(dim=0)
print(y.shape, y.device)
for read in (lambda: print(big), lambda: y.sum().item(), lambda: big.cpu(), lambda: y.tolist(),
             lambda: bool((y > 0).any())):
    try:
        read()
    except RuntimeError as exc:
        print(exc)
"""


def test_a_tensor_too_large_for_the_job_keeps_no_values_and_says_so(tmp_path: Path):
    proc = run(tmp_path, DATALESS)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "torch.Size([8192, 8192]) torch.float32 cuda:0 256 8.0"
    assert lines[1] == "torch.Size([8192]) cuda:0"
    tail = "values of tensors this large are not simulated here; a real GPU computes them"
    assert lines[2] == ("cannot read its values: this tensor on cuda:0 has shape [8192, 8192] (float32, 256.00 MiB); "
                        f"{tail}")
    # a 0-d result is not large: it is told where its values went
    assert lines[3] == ("cannot read its values: this tensor on cuda:0 has shape [] (float32, 4 bytes); it was "
                        "computed from tensors whose values are not simulated here (too large for this job's memory); "
                        "a real GPU computes them")
    assert lines[4] == ("cannot copy its values to the host: this tensor on cuda:0 has shape [8192, 8192] (float32, "
                        f"256.00 MiB); {tail}")
    assert lines[5].startswith("cannot read its values: this tensor on cuda:0 has shape [8192] (float32, 32.00 KiB)")
    assert lines[6].startswith("cannot read its values: this tensor on cuda:0 has shape [] (bool, 1 bytes)")


SEVEN_B = """
import time, torch, torch.nn as nn
start = time.perf_counter()
dtype = torch.{dtype}
model = nn.Sequential(*[nn.Linear(4096, 4096, bias=False, device="cuda", dtype=dtype) for _ in range(416)])
print(sum(p.numel() for p in model.parameters()))
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x = torch.randn(8, 512, 4096, device="cuda", dtype=dtype)
loss = model(x).float().pow(2).mean()
loss.backward()
print("backward done", torch.cuda.max_memory_allocated())
opt.step()
opt.zero_grad(set_to_none=True)
print("step done", torch.cuda.max_memory_allocated(), time.perf_counter() - start)
"""


def test_a_7b_model_fits_one_h100_in_bf16_and_not_in_fp32(tmp_path: Path):
    # no timing here: the sandbox's own limits (10 s of wall time, 1 GiB of memory by default) end a run that
    # held the model's values, so a return code of 0 (and the OOM's own text below) already says they were not
    bf16 = run(tmp_path, SEVEN_B.format(dtype="bfloat16"))
    assert bf16.returncode == 0, bf16.stderr
    lines = bf16.stdout.splitlines()
    assert lines[0] == str(416 * 4096 * 4096)  # 6.98e9 parameters
    peak = int(lines[2].split()[2])
    assert 50 * GiB <= peak <= 79 * GiB, peak / GiB
    fp32 = run(tmp_path, SEVEN_B.format(dtype="float32"))
    assert fp32.returncode == 1 and "backward done" in fp32.stdout and "step done" not in fp32.stdout
    assert "in step" in fp32.stderr and "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 64.00 MiB. " \
        "GPU 0 has a total capacity of 79.19 GiB" in fp32.stderr


LARGE_LAYER = """
import torch, torch.nn as nn
m = nn.Linear(1024, 4096)  # a 16 MiB weight: past COURSE_SIM_DATALESS_TENSOR_BYTES, it keeps no values on the GPU
w = m.weight
m = m.to("cuda")
print(m.weight.device, m.weight is w, type(m.weight).__name__, m.weight.requires_grad)
m(torch.randn(8, 1024, device="cuda")).sum().backward()
print(m.weight.grad.shape, m.weight.grad.device, torch.cuda.memory_allocated() // 2**20)
"""


def test_a_module_with_a_weight_too_large_for_values_moves_as_on_a_card(tmp_path: Path):
    # Module.to() sets each Parameter's .data, as on a real card (CPU and CUDA tensors are compatible there);
    # it used to stop with set_data's "incompatible tensor type" for a weight kept without values
    proc = run(tmp_path, LARGE_LAYER)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["cuda:0 True Parameter True", "torch.Size([4096, 1024]) cuda:0 32"]
