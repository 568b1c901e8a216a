"""`accelerate launch` through the real sandbox (launcher "accelerate"): each rank's Accelerator finds its own
simulated GPU and its own shard of the prepared DataLoader, and the ranks end with the same weights; one process
and `--cpu` run as Accelerate runs there."""

from __future__ import annotations

import json

from app.harness.contract import DEFAULT_HOST
from app.runner import Job

TRAIN = """import json
import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset

accelerator = Accelerator()
x = torch.arange(64, dtype=torch.float32).unsqueeze(1) / 64
loader = DataLoader(TensorDataset(x, 3 * x - 1), batch_size=8, shuffle=False)
model = torch.nn.Linear(1, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model, opt, loader = accelerator.prepare(model, opt, loader)
seen = []
for xb, yb in loader:
    seen += (xb * 64).round().int().flatten().tolist()
    loss = torch.nn.functional.mse_loss(model(xb), yb)
    opt.zero_grad()
    accelerator.backward(loss)
    opt.step()
weights = [round(p.item(), 6) for p in accelerator.unwrap_model(model).parameters()]
print(json.dumps({"type": str(accelerator.distributed_type), "device": str(accelerator.device),
                  "index": accelerator.process_index, "n": accelerator.num_processes, "batch_device": str(xb.device),
                  "seen": seen, "weights": weights}))
"""


def facts(result) -> list[dict]:
    return sorted((json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")),
                  key=lambda f: f["index"])


def test_each_rank_of_accelerate_launch_has_its_gpu_its_shard_and_the_same_weights(sandbox):
    r = sandbox.run(Job(code=TRAIN, filename="train.py", host=DEFAULT_HOST.with_gpus(2), nproc=2,
                        launcher="accelerate"))
    assert r.status == "ok", r.stderr
    ranks = facts(r)
    assert [(f["type"], f["device"], f["batch_device"], f["n"]) for f in ranks] == [
        ("DistributedType.MULTI_GPU", "cuda:0", "cuda:0", 2), ("DistributedType.MULTI_GPU", "cuda:1", "cuda:1", 2)]
    first, second = (set(f["seen"]) for f in ranks)
    assert len(first) == len(second) == 32 and not first & second  # each rank its own half of the data
    assert ranks[0]["weights"] == ranks[1]["weights"]  # gradients averaged: one model
    assert "[default" not in r.stdout  # accelerate's --tee default: the ranks' lines come unprefixed


def test_accelerate_launch_of_one_process_and_with_cpu(sandbox):
    code = ("from accelerate import Accelerator\n"
            "a = Accelerator()\n"
            "print(a.distributed_type, a.device.type, a.num_processes)\n")
    one = sandbox.run(Job(code=code, launcher="accelerate"))
    assert (one.status, one.stdout) == ("ok", "DistributedType.NO cuda 1\n"), one.stderr
    cpu = sandbox.run(Job(code=code, launcher="accelerate-cpu"))
    assert (cpu.status, cpu.stdout) == ("ok", "DistributedType.NO cpu 1\n"), cpu.stderr


def test_gather_for_metrics_brings_every_ranks_values_back_without_the_padding(sandbox):
    """accelerate's gather calls torch 2.13's all_gather_single, which gloo (under simulated NCCL) lacks; the
    harness gathers through gloo's all_gather instead, and gather_for_metrics drops the samples the last batch
    repeated to keep the ranks even (5 values over 2 ranks: 6 gathered, 5 kept)."""
    code = ("import torch\n"
            "from accelerate import Accelerator\n"
            "from torch.utils.data import DataLoader, TensorDataset\n"
            "a = Accelerator()\n"
            "loader = a.prepare(DataLoader(TensorDataset(torch.arange(5.0)), batch_size=1))\n"
            "kept = torch.cat([a.gather_for_metrics(xb) for (xb,) in loader])\n"
            "plain = torch.cat([a.gather(xb) for (xb,) in loader])\n"
            "print(a.process_index, sorted(kept.tolist()), len(plain), kept.device)\n")
    r = sandbox.run(Job(code=code, filename="metrics.py", host=DEFAULT_HOST.with_gpus(2), nproc=2,
                        launcher="accelerate"))
    assert r.status == "ok", r.stderr
    assert sorted(r.stdout.splitlines()) == ["0 [0.0, 1.0, 2.0, 3.0, 4.0] 6 cuda:0",
                                             "1 [0.0, 1.0, 2.0, 3.0, 4.0] 6 cuda:1"]
