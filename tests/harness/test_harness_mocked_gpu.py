"""The harness without the sandbox, in a child interpreter (it patches torch for the whole process).

These tests mock GPUs: the simulated builds stand in for machines with CUDA GPUs or Apple's MPS.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from app.core.config import ROOT
from app.harness.contract import DEFAULT_HOST

DRIVER = """
import json, os, sys
import app.harness as harness
harness.load()
payload = json.loads(sys.stdin.read())
def request_key(meanwhile=None):  # the fork server's part, here
    if meanwhile is not None:
        meanwhile()
    return "n0"
code = harness.main(payload, int(sys.argv[1]), request_key=request_key)
sys.exit(code)
"""

PROBE = """
def probe(ns, api):
    import torch
    out = {}
    for build, gpus, mps in (("cuda", 2, False), ("cuda", 0, False), ("macos-arm64", 0, True),
                             ("macos-arm64", 0, False), ("cpu", 0, False)):
        with api.scenario(build=build, gpus=gpus, mps=mps):
            acc = torch.accelerator.current_accelerator()
            checked = torch.accelerator.current_accelerator(check_available=True)
            out[f"{build}-{gpus}-{mps}"] = [
                torch.cuda.is_available(), torch.cuda.device_count(), torch.backends.cuda.is_built(),
                torch.backends.mps.is_available(), torch.backends.mps.is_built(), torch.accelerator.is_available(),
                None if acc is None else acc.type, None if checked is None else checked.type, ns["early"]()]
    return out
"""


def run_harness(code: str, probe: str | None = None, host=DEFAULT_HOST, cwd=ROOT) -> tuple[int, str, dict | None]:
    """Run harness.main(grade mode) in a fresh interpreter; return (exit code, stderr, report)."""
    read, write = os.pipe()
    payload = {"code": code, "filename": "main.py", "mode": "grade", "host": host.payload(),
               "grade": {"exercise": "t", "probe": probe}}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with subprocess.Popen([sys.executable, "-c", DRIVER, str(write)], cwd=cwd, env=env, pass_fds=(write,),
                          stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as proc:
        os.close(write)
        proc.stdin.write(json.dumps(payload).encode())
        proc.stdin.close()
        with os.fdopen(read, "rb") as report_pipe:
            data = report_pipe.read()
        err = proc.stderr.read().decode()
        proc.wait(60)
    return proc.returncode, err, json.loads(data) if data else None


def test_mocked_gpu_builds_answer_as_torch_documents_them():
    """torch's own availability functions answer for the simulated build: a CUDA build names CUDA as its
    accelerator even without a GPU (unless check_available=True), a macOS arm64 build is always built for MPS."""
    code = "import torch\nfrom torch.cuda import is_available as early\n"
    rc, err, report = run_harness(code, PROBE)
    assert rc == 0, err
    answers = report["probe"]
    #                                 cuda avail, count, cuda built, mps avail, mps built, acc avail, acc, checked
    assert answers["cuda-2-False"] == [True, 2, True, False, False, True, "cuda", "cuda", True]
    assert answers["cuda-0-False"] == [False, 0, True, False, False, False, "cuda", None, False]
    assert answers["macos-arm64-0-True"] == [False, 0, False, True, True, True, "mps", "mps", False]
    assert answers["macos-arm64-0-False"] == [False, 0, False, False, True, False, "mps", None, False]
    assert answers["cpu-0-False"] == [False, 0, False, False, False, False, None, None, False]


def test_mocked_gpu_tensor_reports_cuda_and_refuses_numpy():
    code = ("import torch\nx = torch.ones(2, device='cuda')\nprint(x.device, x.is_cuda, repr(x))\n"
            "print((x * 2).device, x.cpu().device, x.sum().item())\nx.numpy()\n")
    rc, err, report = run_harness(code)
    assert rc == 1
    assert report["nonce"] == "n0" and report["simulated"] is True
    exc = report["outcome"]["exception"]
    assert exc["type"] == "TypeError" and exc["line"] == 5
    assert exc["message"] == ("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor "
                              "to host memory first.")
    assert 'File "main.py", line 5' in err and "harness" not in err


def test_mocked_gpu_stdout_and_report_are_separate_channels():
    rc, err, report = run_harness("print('{\"status\": \"passed\"}')\n")
    assert rc == 0 and report["outcome"]["finished"] and "status" not in report


LOADER_PROBE = """
def probe(ns, api):
    return {name: [api.device_of(t) for t in ns[name]] + [t.__dict__.get("_pt_batch") for t in ns[name]]
            for name in ("host_batch", "device_batch", "custom_batch")}
"""


def test_dataloader_batches_keep_their_marks_whether_or_not_the_fetch_is_traced():
    """A TensorDataset of host tensors is fetched untraced (fast), one already on the simulated GPU and a
    learner's own Dataset are traced; all three give batches with the right device and batch index."""
    code = (
        "import torch\n"
        "from torch.utils.data import DataLoader, Dataset, TensorDataset\n"
        "X, Y = torch.ones(8, 2), torch.zeros(8, 1)\n"
        "host_batch = next(iter(DataLoader(TensorDataset(X, Y), batch_size=4)))\n"
        "device_batch = next(iter(DataLoader(TensorDataset(X.to('cuda'), Y.to('cuda')), batch_size=4)))\n"
        "class Moving(Dataset):\n"
        "    def __len__(self): return 8\n"
        "    def __getitem__(self, i): return X[i].to('cuda'), Y[i].to('cuda')\n"
        "custom_batch = next(iter(DataLoader(Moving(), batch_size=4)))\n")
    rc, err, report = run_harness(code, LOADER_PROBE)
    assert rc == 0, err
    assert report["probe"] == {"host_batch": ["cpu", "cpu", 0, 0], "device_batch": ["cuda:0", "cuda:0", 1, 1],
                               "custom_batch": ["cuda:0", "cuda:0", 2, 2]}
    assert report["trace"]["batches"] == 3
    moves_in_dataset = [e for e in report["trace"]["events"]["move"] if e["line"] == 8]
    assert len(moves_in_dataset) == 8  # the learner's __getitem__ ran traced: 4 samples x 2 moves


def test_mocked_gpu_invalid_ordinal_stops_the_program_with_cudas_error():
    code = "import torch\nx = torch.ones(2).to(0)\ny = x.to('cuda:1')\n"
    rc, err, report = run_harness(code)
    assert rc == 1
    exc = report["outcome"]["exception"]
    assert exc["type"] == "AcceleratorError" and exc["line"] == 3
    assert exc["message"].startswith("CUDA error: invalid device ordinal\n")
    assert "torch.AcceleratorError: CUDA error: invalid device ordinal" in err and "harness" not in err


def test_mocked_two_gpus_are_distinct_devices_that_refuse_to_mix():
    code = ("import torch\na = torch.ones(2, device='cuda:0')\nb = torch.ones(2, device=1)\n"
            "print(a.device, b.device, (a + b.to(a.device)).device)\nc = a + b\n")
    rc, err, report = run_harness(code, host=DEFAULT_HOST.with_gpus(2))
    assert rc == 1
    assert report["outcome"]["exception"]["message"] == (
        "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cuda:1!")
    assert report["trace"]["events"]["mismatch"][0]["line"] == 5


def test_mocked_gpu_unsimulated_cuda_apis_say_so_in_one_line():
    code = ("import torch\nimport torch.multiprocessing as mp\n"
            "for call in (lambda: torch.cuda.CUDAGraph(), torch.cuda.memory_snapshot,\n"
            "             lambda: torch.cuda.utilization(0), lambda: mp.spawn(print, nprocs=2)):\n"
            "    try:\n        call()\n    except RuntimeError as exc:\n        print(type(exc).__name__, exc)\n")
    read, write = os.pipe()
    payload = {"code": code, "filename": "main.py", "mode": "run", "host": DEFAULT_HOST.payload(), "grade": None}
    with subprocess.Popen([sys.executable, "-c", DRIVER, str(write)], cwd=ROOT, pass_fds=(write,),
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        os.close(write)
        os.close(read)
        out, err = proc.communicate(json.dumps(payload).encode(), timeout=60)
    assert proc.returncode == 0, err.decode()
    assert out.decode().splitlines() == [
        f"NotSimulatedError not simulated on this CPU-only host: {api}; it works on a real GPU"
        for api in ("torch.cuda.CUDAGraph", "torch.cuda.memory_snapshot", "torch.cuda.utilization",
                    # the DDP tutorials' launcher: its processes would be new interpreters without the simulated GPUs
                    "torch.multiprocessing.spawn (the processes it starts are new interpreters, without this host's "
                    "simulated GPUs; start one process per GPU with torchrun instead)")]


def test_outside_a_sandbox_the_learners_file_is_not_written_where_the_harness_runs(tmp_path):
    """Only an isolated job's own temp dir gets the learner's file (app/harness/interpreter.py OWN_FOLDER); a folder
    the harness merely runs in may be shared (here it would have been the project's root)."""
    rc, err, report = run_harness("print(open(__file__).read())\n", cwd=tmp_path)
    assert (rc, list(tmp_path.iterdir())) == (1, []), err
    assert report["outcome"]["exception"]["type"] == "FileNotFoundError"
