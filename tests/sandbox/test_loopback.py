"""One process with its own loopback (Job.loopback, a lesson block marked ```` ```python runnable loopback ````),
and DataLoader workers, which need none, through the real sandbox under both pools: the lesson's one-process gloo
group (loopback) and its blocks with DataLoader workers (an ordinary job: the workers hand their batches back over
Unix sockets, which every job may use inside itself) run on the simulated H100 and print what their ```output
blocks say, and a forked worker that touches CUDA after its parent used it stops with torch's own error.
tests/security/test_hostile_loopback.py holds what a loopback job still cannot do, tests/security/test_hostile.py
what an ordinary job's Unix sockets cannot reach."""

from __future__ import annotations

import pytest

from app import ROOT
from app.content.course import load_course
from app.content.machine_choices import BY_ID
from app.content.runnable import output_error, outputs_of
from app.runner import BlockingRunner, Job
from app.sandbox.child import LOOPBACK, RANKS
from app.sandbox.jobqueue import network_of
from app.submissions.block_runs import block_job
from tests.helpers import make_settings

COURSE = load_course(ROOT / "lessons", ROOT / "exercises")
OUTPUTS = outputs_of(COURSE)
LOOPBACK_BLOCKS = [(lesson.path, block) for lesson in COURSE.lessons for block in lesson.runnable_blocks
                   if block.loopback]
WORKER_BLOCKS = [(lesson.path, block) for lesson in COURSE.lessons for block in lesson.runnable_blocks
                 if "num_workers=2" in block.code]


@pytest.fixture(scope="module", params=["prefork", "spawn"])
def pool_sandbox(request, tmp_path_factory):
    settings = make_settings(tmp_path_factory.mktemp("loopback"), sandbox_prefork=1, sandbox_pool=request.param)
    with BlockingRunner(settings) as runner:
        yield runner


def test_only_the_gloo_block_asks_for_its_loopback_and_the_workers_blocks_run_as_ordinary_jobs():
    assert ['"gloo"' in block.code for _, block in LOOPBACK_BLOCKS] == [True]
    assert len(WORKER_BLOCKS) == 2 and not any(block.loopback for _, block in WORKER_BLOCKS)
    assert all(OUTPUTS.get((path, block.line), {}).get("h100") for path, block in LOOPBACK_BLOCKS + WORKER_BLOCKS)


def test_a_job_asks_for_its_loopback_in_its_payload():
    job = Job(code="pass", loopback=True)
    assert job.payload()["loopback"] is True and Job.from_payload(job.payload()).loopback is True
    assert network_of(job.payload()) == LOOPBACK and network_of(Job(code="pass").payload()) is None
    assert network_of(Job(code="pass", nproc=2).payload()) == RANKS  # with the machine keepers, never a lone process
    assert network_of({"loopback": "yes"}) is None  # only JSON true asks


@pytest.mark.parametrize(("path", "block"), LOOPBACK_BLOCKS, ids=[f"{p.stem}:{b.line}" for p, b in LOOPBACK_BLOCKS])
def test_a_loopback_block_runs_on_the_simulated_h100_as_its_output_says(pool_sandbox, path, block):
    result = pool_sandbox.run(block_job(block.code, BY_ID["h100"], loopback=True))
    assert (result.status, result.exit_code) == ("ok", 0), result.stderr[-2000:]
    assert output_error(path, block, result.stdout, OUTPUTS[(path, block.line)]["h100"], "h100") is None, result.stdout


@pytest.mark.parametrize(("path", "block"), WORKER_BLOCKS, ids=[f"{p.stem}:{b.line}" for p, b in WORKER_BLOCKS])
def test_a_workers_block_runs_as_an_ordinary_job_as_its_output_says(pool_sandbox, path, block):
    """Before 2026-12-06 an ordinary job could not bind a Unix socket: the workers' batches never came back, and the
    loader waited until the wall limit with multiprocessing's PermissionError on stderr."""
    result = pool_sandbox.run(block_job(block.code, BY_ID["h100"]))
    assert (result.status, result.exit_code) == ("ok", 0), result.stderr[-2000:]
    assert output_error(path, block, result.stdout, OUTPUTS[(path, block.line)]["h100"], "h100") is None, result.stdout


def test_every_job_binds_unix_sockets_and_only_a_loopback_job_tcp_ones(pool_sandbox):
    """Why the flag still exists: an ordinary job may bind an AF_UNIX socket (DataLoader workers need one), never
    open an AF_INET one, which a one-process gloo group binds to 127.0.0.1."""
    code = ("import socket, tempfile\nfor family, address in ((socket.AF_UNIX, tempfile.mktemp()),\n"
            "                        (socket.AF_INET, ('127.0.0.1', 0))):\n    try:\n"
            "        socket.socket(family).bind(address)\n        print('bound')\n"
            "    except OSError as exc:\n        print('refused', exc.errno)\n")
    assert pool_sandbox.run(Job(code=code)).stdout == "bound\nrefused 1\n"
    assert pool_sandbox.run(Job(code=code, loopback=True)).stdout == "bound\nbound\n"


CUDA_IN_A_WORKER = """
import torch
from torch.utils.data import DataLoader, Dataset


class OnTheGpu(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return torch.tensor([float(i)]).to("cuda")


class InMainMemory(OnTheGpu):
    def __getitem__(self, i):
        return torch.tensor([float(i)])


print("parent on", torch.ones(1, device="cuda").device)
for xb in DataLoader(InMainMemory(), batch_size=2, num_workers=2):
    print("batch from a worker on", xb.device, "| to", xb.to("cuda").device)
for xb in DataLoader(OnTheGpu(), batch_size=2, num_workers=2):
    print("never", xb)
"""


def test_a_worker_forked_after_the_parent_used_cuda_cannot_use_it(pool_sandbox):
    result = pool_sandbox.run(block_job(CUDA_IN_A_WORKER, BY_ID["h100"]))
    assert result.status == "failed", result
    assert result.stdout.splitlines() == ["parent on cuda:0"] + ["batch from a worker on cpu | to cuda:0"] * 2
    assert "RuntimeError: Caught RuntimeError in DataLoader worker process" in result.stderr
    # torch/cuda/__init__.py, _lazy_init (torch 2.13)
    assert ("RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you "
            "must use the 'spawn' start method") in result.stderr
    # the worker's traceback runs from the learner's __getitem__ into torch, as on a real GPU: no harness frames
    original = result.stderr[result.stderr.index("Original Traceback"):]
    assert 'File "main.py", line 11, in __getitem__' in original and "/app/harness/" not in original, original
