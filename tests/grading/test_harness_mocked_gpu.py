"""The harness without the sandbox, in a child interpreter (it patches torch for the whole process).

These tests mock GPUs: the availability scenarios stand in for machines with CUDA and/or Apple's MPS.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from app.config import ROOT

DRIVER = """
import json, os, sys
import app.sandbox.harness as harness
payload = json.loads(sys.stdin.read())
code = harness.main(payload, int(sys.argv[1]))
sys.exit(code)
"""

PROBE = """
def probe(ns, api):
    import torch
    out = {}
    for cuda in (True, False):
        for mps in (True, False):
            with api.scenario(cuda=cuda, mps=mps):
                acc = torch.accelerator.current_accelerator()
                out[f"{cuda}-{mps}"] = [torch.cuda.is_available(), torch.cuda.device_count(),
                                        torch.backends.mps.is_available(), torch.backends.mps.is_built(),
                                        torch.accelerator.is_available(), None if acc is None else acc.type,
                                        ns["early"]()]
    return out
"""


def run_harness(code: str, probe: str | None = None) -> tuple[int, str, dict | None]:
    """Run harness.main(grade mode) in a fresh interpreter; return (exit code, stderr, report)."""
    read, write = os.pipe()
    payload = {"code": code, "filename": "main.py", "mode": "grade",
               "grade": {"exercise": "t", "probe": probe, "nonce": "n0"}}
    with subprocess.Popen([sys.executable, "-c", DRIVER, str(write)], cwd=ROOT, pass_fds=(write,),
                          stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as proc:
        os.close(write)
        proc.stdin.write(json.dumps(payload).encode())
        proc.stdin.close()
        with os.fdopen(read, "rb") as report_pipe:
            data = report_pipe.read()
        err = proc.stderr.read().decode()
        proc.wait(60)
    return proc.returncode, err, json.loads(data) if data else None


def test_mocked_gpu_availability_apis_agree_in_every_scenario():
    code = "import torch\nfrom torch.cuda import is_available as early\n"
    rc, err, report = run_harness(code, PROBE)
    assert rc == 0, err
    answers = report["probe"]
    assert answers["True-True"] == [True, 1, True, True, True, "cuda", True]
    assert answers["True-False"] == [True, 1, False, False, True, "cuda", True]
    assert answers["False-True"] == [False, 0, True, True, True, "mps", False]
    assert answers["False-False"] == [False, 0, False, False, False, None, False]


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
