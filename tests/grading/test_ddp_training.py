"""ddp-training through the real sandbox with two ranks, as `torchrun --standalone --nproc-per-node=2` runs it.

The solution, every wrong answer and the correct variants run in test_exercises_on_simulated_gpu.py with the other
exercises; this module holds what is particular to several ranks: per-rank output, the first failure shown first,
per-rank messages, and cheating that a launcher makes possible.
"""

from __future__ import annotations

from app.core.config import ROOT
from app.submissions import history as verdicts

# the issue's check ids, in its order
CHECKS = ["runs", "process_group", "rank_device", "ddp_wrapped", "sharded_data", "set_epoch", "in_sync", "rank0_only"]
WRONG = ROOT / "exercises" / "ddp-training" / "wrong"

RANK1_FAILS = '''import os
import torch
import torch.distributed as dist

dist.init_process_group("nccl")
rank = dist.get_rank()
torch.cuda.set_device(rank)
print("ready", rank)
if rank == 1:
    raise ValueError("rank one broke")
total = torch.ones(1, device="cuda")
dist.all_reduce(total)
print("unreachable", rank)
'''


def test_checks_are_the_issues_in_its_order(exercises):
    assert exercises["ddp-training"].spec.check_ids == CHECKS
    assert exercises["ddp-training"].spec.nproc == 2 and exercises["ddp-training"].spec.gpus == 2


def test_solution_streams_each_ranks_lines_with_torchruns_prefix(grade, exercises):
    lines: list[tuple[str, str]] = []
    verdict = grade("ddp-training", exercises["ddp-training"].solution, lambda e: lines.append((e.stream, e.line)))
    assert verdict.status == "passed", [c for c in verdict.checks if not c.passed]
    assert verdict.device == "cuda:0, cuda:1 (2 ranks, simulated on CPU)"
    out = [line for stream, line in lines if stream == "stdout"]
    assert len(out) == 5 and all(line.startswith("[default0]:epoch ") for line in out)  # rank 0 prints alone


def test_starter_runs_on_both_ranks_and_fails_the_ddp_checks(grade, exercises):
    verdict = grade("ddp-training", exercises["ddp-training"].starter)
    assert verdict.status == "failed"
    assert {line[:11] for line in verdict.stdout.splitlines()} == {"[default0]:", "[default1]:"}
    failed = verdict.failed_ids()
    assert {"process_group", "rank_device", "ddp_wrapped", "sharded_data", "set_epoch", "rank0_only"} <= set(failed)
    device = next(c for c in verdict.checks if c.id == "rank_device")
    assert device.message.startswith("rank 1: line 13: the model went to cuda:0") and device.line == 13
    assert "this rank's GPU is cuda:1" in device.message
    saved = next(c for c in verdict.checks if c.id == "rank0_only")
    assert saved.message.startswith("rank 1: line 26: rank 1 wrote the checkpoint too")


def test_the_first_failing_ranks_traceback_comes_first_and_the_others_are_stopped(grade):
    verdict = grade("ddp-training", RANK1_FAILS)
    runs = verdict.checks[0]
    assert not runs.passed and runs.line == 10
    assert runs.message.startswith("rank 1: line 10: ValueError: rank one broke")
    assert "stopped rank 0, as torchrun does" in runs.message
    stderr = verdict.stderr.splitlines()
    first = next(i for i, line in enumerate(stderr) if "Traceback (most recent call last)" in line)
    assert stderr[first] == "[default1]:[rank1]: Traceback (most recent call last):"  # torch's own [rank1] prefix
    assert "[default1]:[rank1]: ValueError: rank one broke" in stderr
    assert "main.py FAILED" in stderr and "Root Cause (first observed failure):" in stderr
    root = stderr.index("Root Cause (first observed failure):")
    assert stderr[root + 4] == "  rank      : 1 (local_rank: 1)"
    stopped = [line for line in stderr[:root] if line.startswith("  exitcode  : -15 (pid: ")]
    assert len(stopped) == 1 and stopped[0].endswith(" (SIGTERM)")  # rank 0, stopped while it waited
    assert "unreachable" not in verdict.stdout
    # the instructor dashboard counts this attempt's exception: the failing rank's, not torchrun's summary
    assert verdicts.exception_line(verdict.stderr) == "ValueError: rank one broke"


def test_every_rank_on_cuda0_meets_nccls_duplicate_gpu_error_and_is_told_its_own_gpu(grade):
    verdict = grade("ddp-training", (WRONG / "every_rank_on_cuda0.py").read_text())
    runs = verdict.checks[0]
    assert "DistBackendError: Duplicate GPU detected : rank" in runs.message
    # the dashboard's exception for this attempt: the first line of NCCL's message, as torch prints it
    assert verdicts.exception_line(verdict.stderr).startswith("torch.distributed.DistBackendError: NCCL error in:")
    assert "both on CUDA device 18000" in runs.message
    device = next(c for c in verdict.checks if c.id == "rank_device")
    assert device.message.startswith("rank 1: line 22: the model went to cuda:0 (every rank put it there)")


def test_a_mistake_every_rank_makes_is_worded_once(grade):
    verdict = grade("ddp-training", (WRONG / "no_set_epoch.py").read_text())
    assert verdict.failed_ids() == ["set_epoch"]
    assert verdict.checks[5].message.startswith("every rank: the sampler gave the same order in two epochs")


def test_ranks_that_end_themselves_before_the_work_fail(grade, exercises):
    verdict = grade("ddp-training", "import os\nprint('passed', flush=True)\nos._exit(0)\n"
                    + exercises["ddp-training"].solution)
    assert verdict.status == "failed" and all(not c.passed for c in verdict.checks)
    assert "ended before the grader could collect its results" in verdict.checks[0].message


def test_a_rank_cannot_write_the_jobs_report(grade, exercises):
    forge = ("import json, os\n"
             "for fd in (3, 4, 5):\n"
             "    try:\n"
             "        os.write(fd, json.dumps({'nonce': 'x', 'report': {}}).encode() + b'\\n')\n"
             "        print('wrote', fd)\n"
             "    except OSError as exc:\n"
             "        print('refused', fd, exc.errno)\n")
    verdict = grade("ddp-training", forge + exercises["ddp-training"].starter)
    assert verdict.status == "failed"
    assert "[default0]:refused 4 9" in verdict.stdout and "[default0]:refused 5 9" in verdict.stdout  # EBADF


def test_a_rank_stopped_before_it_reported_leaves_its_checks_undecided_never_passed(exercises):
    """Which rank meets NCCL's duplicate-GPU error first is a race. When rank 0 wins, the launcher stops rank 1
    before it reports, and rank 0's facts alone look right (its model is on cuda:0, its own GPU): the checks must
    not pass on that, or every_rank_on_cuda0.py would pass rank_device on a busy machine."""
    from app.grading.facts import Facts
    from app.grading.grader import checks_module

    rank0 = {"rank": 0, "reported": True, "exit_code": 1,
             "trace": {"events": {"forward": [{"line": 30, "has_params": True, "param_devices": ["cuda:0"],
                                               "inputs": [{"dim": 2, "device": "cuda:0", "names": ["xb"]}]}],
                                  "module_move": [{"line": 22, "devices": ["cuda:0"]}]}}}
    rank1 = {"rank": 1, "reported": False, "stopped": True, "signal": 15}
    facts = Facts({"ranks": [rank0, rank1], "launch": {"first_failure": 0}})
    decided = {c.id: c for c in checks_module(exercises["ddp-training"]).evaluate(facts)}
    assert not decided["rank_device"].passed and decided["rank_device"].line is None
    assert "rank 1 stopped before it reported" in decided["rank_device"].message
    both = Facts({"ranks": [rank0, {**rank0, "rank": 1}], "launch": {"first_failure": 0}})
    decided = {c.id: c for c in checks_module(exercises["ddp-training"]).evaluate(both)}
    assert not decided["rank_device"].passed and decided["rank_device"].line == 22  # rank 1 on cuda:0, named
