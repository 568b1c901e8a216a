"""torch.profiler on a simulated GPU (issue 26, part 3), through the real sandbox (`course run`) on the default
simulated H100: the table's CUDA columns carry the clock's modeled times, the Chrome trace has GPU stream rows, and
the device-side figures are the same on every run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from app.harness.machine import machines
from app.harness.machine.clock import DeviceClock
from tests.support.busy import busy_cpu

COURSE = [str(Path(sys.executable).with_name("course"))]

PROFILED = r'''
import json, torch
from torch.profiler import ProfilerActivity, profile, record_function
a = torch.randn(1024, 1024, device="cuda")
b = torch.randn(1024, 1024, device="cuda")
x = torch.randn(1 << 20)
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    with record_function("step"):
        y = x.to("cuda")
        c = a @ b
        total = c.sum().item()
table = prof.key_averages().table(sort_by="cuda_time_total", row_limit=15)
print(table)
prof.export_chrome_trace("trace.json")
with open("trace.json") as f:
    trace = json.load(f)
rows = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
print(json.dumps({
    "avg": {e.key: [e.device_time_total, e.self_device_time_total, e.count] for e in prof.key_averages()},
    "spans": [[rows[e["tid"]], e["name"], e["cat"], e["dur"]] for e in trace["traceEvents"] if e["ph"] == "X"],
    "header": [line for line in table.splitlines() if line.split()[:1] == ["Name"]][0],
    "mm_row": [line for line in table.splitlines() if line.split()[:1] == ["aten::mm"]][0],
    # torch 2.13's other spellings of the sort keys: the deprecated cuda_ ones and device_ (profiler_util.py)
    "tops": {key: prof.key_averages().table(sort_by=key, row_limit=1).splitlines()[3].split()[0]
             for key in ("self_cuda_time_total", "device_time_total", "self_device_time_total")},
}))
'''


def run(tmp_path: Path, code: str) -> dict:
    script = tmp_path / "main.py"
    script.write_text(code)
    proc = subprocess.run([*COURSE, "run", str(script)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "COURSE_ENV": "development", "COURSE_SANDBOX_WALL_S": "120"})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def modeled_matmul_us() -> float:
    """The clock's own figure for one 1024 x 1024 fp32 product on the H100: 2 * 1024^3 FLOPs, three 4 MiB tensors."""
    clock = DeviceClock()
    clock.figures = machines.clock_figures(machines.get("h100"))
    return clock.kernel_seconds(2 * 1024 ** 3, 3 * 4 * 1024 * 1024, torch.float32) * 1e6


def test_the_profiler_table_shows_cuda_columns_with_the_clocks_modeled_times(tmp_path: Path):
    out = run(tmp_path, PROFILED)
    # the columns torch 2.13's _build_table prints on a CUDA host (torch/autograd/profiler_util.py)
    for column in ("Self CPU", "CPU total", "Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg", "# of Calls"):
        assert column in out["header"], out["header"]
    expected = modeled_matmul_us()
    assert 40 <= expected <= 60  # 2.15 GFLOP at 70% of FP32's 67 TFLOPS, plus the kernel floor
    avg = out["avg"]
    # the kernel is aten::mm's (as a CUDA host attributes it), and aten::matmul's through its child
    assert abs(avg["aten::mm"][0] - expected) < 1e-6 and abs(avg["aten::mm"][1] - expected) < 1e-6, avg
    assert abs(avg["aten::matmul"][0] - expected) < 1e-6 and avg["aten::matmul"][1] == 0, avg
    assert abs(avg["mm kernel"][1] - expected) < 1e-6, avg
    assert f"{expected:.3f}us" in out["mm_row"], out["mm_row"]
    assert out["tops"] == {"self_cuda_time_total": "aten::copy_", "device_time_total": "step",
                           "self_device_time_total": "aten::copy_"}, out["tops"]
    # the copy as Kineto names CUPTI's memcpy, the sync of .item(), and the record_function range around them all
    assert avg["Memcpy HtoD (Pageable -> Device)"][1] > 0, avg
    assert "cudaStreamSynchronize" in avg, avg
    assert avg["step"][0] >= expected + avg["Memcpy HtoD (Pageable -> Device)"][1], avg


def test_the_profilers_chrome_trace_has_host_and_gpu_stream_rows(tmp_path: Path):
    spans = run(tmp_path, PROFILED)["spans"]
    kernels = [s for s in spans if s[2] == "kernel"]
    assert ["cuda:0 stream default", "mm kernel", "kernel"] in [s[:3] for s in kernels], kernels
    assert any(s[0] == "cuda:0 copy engine" and s[1] == "Memcpy HtoD (Pageable -> Device)" for s in spans), spans
    host = {s[1] for s in spans if s[0] == "host"}
    assert {"step", "aten::matmul", "aten::mm", "cudaStreamSynchronize"} <= host, host


def test_the_profilers_device_figures_are_the_same_on_every_run_and_under_load(tmp_path: Path):
    def device_side(out):
        return {key: value for key, value in out["avg"].items() if value[0] and "cuda" not in key}

    first = run(tmp_path, PROFILED)
    with busy_cpu():  # a loaded machine
        loaded = run(tmp_path, PROFILED)
    assert device_side(first) and device_side(first) == device_side(loaded)


SCHEDULED = r'''
import json, torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512)).to("cuda")
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(256, 512, device="cuda"), torch.randn(256, 512, device="cuda")
seen = {}
def ready(prof):
    prof.export_chrome_trace(f"trace_{prof.step_num}.json")
    with open(f"trace_{prof.step_num}.json") as f:
        names = {e["args"]["name"] for e in json.load(f)["traceEvents"] if e["name"] == "thread_name"}
    seen[prof.step_num] = {"keys": sorted(e.key for e in prof.key_averages()), "rows": sorted(names)}
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
             schedule=schedule(wait=1, warmup=1, active=2), on_trace_ready=ready) as prof:
    for step in range(5):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        prof.step()
print(json.dumps(seen))
'''


def test_a_scheduled_profile_of_training_steps_reaches_on_trace_ready(tmp_path: Path):
    seen = run(tmp_path, SCHEDULED)
    assert list(seen) == ["4"]  # wait, warmup, then two active steps: one trace, when the fourth step ends
    keys = seen["4"]["keys"]
    assert {"ProfilerStep*", "aten::addmm", "addmm kernel", "autograd::backward (modeled)",
            "backward kernels (modeled)", "Optimizer.step#SGD.step"} <= set(keys), keys
    assert seen["4"]["rows"] == ["cuda:0 stream default", "host"]


DISTRIBUTED = r'''
import json, torch, torch.distributed as dist
from torch.profiler import ProfilerActivity, profile
dist.init_process_group("nccl")
rank = dist.get_rank()
t = torch.ones(1 << 20, device=f"cuda:{rank}")
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    dist.all_reduce(t)
if rank == 0:
    print(json.dumps({e.key: e.self_device_time_total for e in prof.key_averages()}))
dist.destroy_process_group()
'''


def test_a_profile_of_a_simulated_nccl_all_reduce_names_nccl(tmp_path: Path):
    script = tmp_path / "main.py"
    script.write_text(DISTRIBUTED)
    proc = subprocess.run([*COURSE, "run", "--nproc", "2", str(script)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "COURSE_ENV": "development", "COURSE_SANDBOX_WALL_S": "120"})
    assert proc.returncode == 0, proc.stderr
    keys = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("[default0]:{"))[11:])
    assert keys["nccl all_reduce"] > 0, keys  # the ring's modeled time on NCCL's stream
    assert "nccl:all_reduce" in keys and not any(key.startswith("gloo") for key in keys), keys
