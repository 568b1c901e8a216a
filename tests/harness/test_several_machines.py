"""Several simulated machines in one job, as `torchrun --nnodes=2 --nproc-per-node=2 --rdzv-backend=c10d` starts
them on each machine, through the real sandbox: torchrun's environment per rank, each machine's own GPUs, an
all-reduce over all four ranks, the classic `cuda:RANK` mistake failing on the second machine only, and each
machine's own torchrun summary."""

from __future__ import annotations

import json
import re

from app.harness.contract import DEFAULT_HOST
from app.runner import Job

ENV = ["RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_WORLD_SIZE",
       "ROLE_WORLD_SIZE", "MASTER_ADDR"]


def run_machines(sandbox, code: str, nnodes: int = 2, per_node: int = 2):
    return sandbox.run(Job(code=code, filename="machines.py", host=DEFAULT_HOST.with_gpus(per_node),
                           nproc=nnodes * per_node, nnodes=nnodes))


def by_machine(text: str) -> dict[tuple[int, int], list[str]]:
    """Split `node<g>: [default<l>]:` prefixed output into (machine, local rank) lines."""
    lines: dict[tuple[int, int], list[str]] = {}
    for line in text.splitlines():
        match = re.match(r"node(\d+): \[default(\d+)\]:(.*)", line)
        if match:
            lines.setdefault((int(match.group(1)), int(match.group(2))), []).append(match.group(3))
    return lines


def test_every_rank_of_two_machines_gets_torchruns_environment_and_its_machines_gpus(sandbox):
    code = ("import json, os, torch\n"
            f"env = {{k: os.environ[k] for k in {ENV!r}}}\n"
            "print(json.dumps({**env, 'gpus': torch.cuda.device_count()}))\n")
    r = run_machines(sandbox, code)
    assert (r.status, r.exit_code) == ("ok", 0), r.stderr
    seen = {key: json.loads(lines[0]) for key, lines in by_machine(r.stdout).items()}
    assert sorted(seen) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for (node, local), env in seen.items():
        rank = node * 2 + local
        assert env == {"RANK": str(rank), "LOCAL_RANK": str(local), "GROUP_RANK": str(node), "ROLE_RANK": str(rank),
                       "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2", "GROUP_WORLD_SIZE": "2", "ROLE_WORLD_SIZE": "4",
                       "MASTER_ADDR": "node0", "gpus": 2}


def test_an_all_reduce_spans_all_four_ranks_on_each_machines_cuda_local_rank(sandbox):
    code = ("import os, torch, torch.distributed as dist\n"
            "dist.init_process_group('nccl')\n"
            "local = int(os.environ['LOCAL_RANK'])\n"
            "torch.cuda.set_device(local)\n"
            "t = torch.ones(1, device=f'cuda:{local}') * (dist.get_rank() + 1)\n"
            "dist.all_reduce(t)\n"
            "print(t.device, t.item())\n"
            "dist.destroy_process_group()\n")
    r = run_machines(sandbox, code)
    assert r.status == "ok", r.stderr
    seen = by_machine(r.stdout)
    assert {key: lines[0] for key, lines in seen.items()} == {
        (0, 0): "cuda:0 10.0", (0, 1): "cuda:1 10.0", (1, 0): "cuda:0 10.0", (1, 1): "cuda:1 10.0"}


def test_cuda_rank_instead_of_local_rank_fails_on_the_second_machine_only(sandbox):
    # machine 1's ranks start their mistake a second late and machine 0's wait past it: the first failure has
    # the launcher stop every rank, so without the delay machine 1 could fail before one of machine 0's ranks
    # printed (a clean run on 2 cores saw machine 0's local rank 1 stopped before its line)
    code = ("import os, time, torch\n"
            "second = os.environ['GROUP_RANK'] == '1'\n"
            "time.sleep(1.0 if second else 0)\n"
            "x = torch.ones(1, device=f\"cuda:{os.environ['RANK']}\")\n"
            "print('ok on', x.device, flush=True)\n"
            "time.sleep(0 if second else 5)\n")
    r = run_machines(sandbox, code)
    assert (r.status, r.exit_code) == ("failed", 1)
    seen = by_machine(r.stdout)
    assert seen[(0, 0)] == ["ok on cuda:0"] and seen[(0, 1)] == ["ok on cuda:1"]
    assert (1, 0) not in seen and (1, 1) not in seen
    failures = by_machine(r.stderr)
    # either of machine 1's ranks may fail first and have the launcher stop the other before it writes (as torchrun's
    # agent does): a clean clone's make test saw only local rank 1's error, twice
    assert any("CUDA error: invalid device ordinal" in line
               for line in failures.get((1, 0), []) + failures.get((1, 1), [])), r.stderr
    # the second machine's torchrun says so in its own words, prefixed with its name
    summary = [line for line in r.stderr.splitlines() if line.startswith("node1: ") and "[default" not in line]
    assert "node1: torch.distributed.elastic.multiprocessing.errors.ChildFailedError: " in summary
    assert "node1:   host      : node1" in summary and "node1: machines.py FAILED" in summary
    root = summary.index("node1: Root Cause (first observed failure):")
    assert re.fullmatch(r"node1:   rank      : [23] \(local_rank: [01]\)", summary[root + 4])


def test_two_machines_of_one_gpu_each_may_both_use_cuda_0(sandbox):
    """NCCL tells GPUs apart by host and bus: cuda:0 of each machine is a GPU of its own (no duplicate GPU)."""
    code = ("import torch, torch.distributed as dist\n"
            "dist.init_process_group('nccl')\n"
            "t = torch.ones(1, device='cuda:0')\n"
            "dist.all_reduce(t)\n"
            "print(t.item())\n"
            "dist.destroy_process_group()\n")
    r = run_machines(sandbox, code, per_node=1)
    assert r.status == "ok", r.stderr
    assert {k: v[0] for k, v in by_machine(r.stdout).items()} == {(0, 0): "2.0", (1, 0): "2.0"}


def test_each_machine_has_its_own_tmp_shm_and_host_name(sandbox):
    """A checkpoint machine 1 writes to /tmp is not on machine 0, nor a file in /dev/shm (each machine's keeper
    mounts its own tmpfs, app/sandbox/nodes.py); the ranks of one machine share theirs."""
    code = ("import os, socket, torch, torch.distributed as dist\n"
            "dist.init_process_group('gloo')\n"
            "if os.environ['LOCAL_RANK'] == '0':\n"
            "    torch.save({'w': 1}, f\"/tmp/ckpt-{os.environ['GROUP_RANK']}.pt\")\n"
            "    open('here.txt', 'w').write(os.environ['GROUP_RANK'])\n"
            "    open(f\"/dev/shm/seg-{os.environ['GROUP_RANK']}\", 'w').write('x')\n"
            "dist.barrier()\n"
            # what the job wrote (a checkout under /tmp, as a clean clone may be, is bound there read-only too)
            "print(sorted(n for n in os.listdir('/tmp') if n.endswith(('.pt', '.txt'))), open('here.txt').read(),"
            " socket.gethostname(), os.getcwd(), os.listdir('/dev/shm'))\n"
            "dist.destroy_process_group()\n")
    r = run_machines(sandbox, code)
    assert r.status == "ok", r.stderr
    assert {key: lines[0] for key, lines in by_machine(r.stdout).items()} == {
        (node, local): f"['ckpt-{node}.pt', 'here.txt'] {node} node{node} /tmp ['seg-{node}']"
        for node in (0, 1) for local in (0, 1)}


def test_the_machine_keepers_protocol_matches_the_launchers():
    """The sandbox and the harness import nothing of each other: the numbers they share are held equal here."""
    from app.harness import contract, launch
    from app.sandbox import nodes

    assert nodes.MAX_NODES == contract.MAX_NODES and nodes.HEADER.format == launch.MACHINE_HEADER.format
    assert nodes.NODE == launch.rankmod.NODE
