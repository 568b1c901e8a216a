"""Code that runs INSIDE the sandbox. It imports nothing from `app` outside this package.

`main(payload, report_fd)` is what a sandboxed child calls once it is isolated. The fork server imports this
package before forking, so the child never needs to read project files (which its mount namespace hides).

    plain.py         plain mode: the learner's file as `__main__`, its traceback from its own line on
    grade.py         grading mode: run the learner's file under the tracer, then the exercise's probe; one report
    launch.py        several ranks in one job, as torchrun starts them: the launcher (rank.py: one rank)
    distributed.py   torch.distributed's facts per rank, and NCCL over gloo on simulated GPUs
    session.py       one job's simulated host, wired together (both modes)
    host.py          the simulated host as the payload describes it (build, GPUs, card)
    builds.py        the torch build the program believes in: flags, torch.device(0), probe scenarios
    devices.py       which GPUs exist, which are visible (CUDA_VISIBLE_DEVICES), which is current
    cuda_runtime.py  torch._C's CUDA entry points, simulated: device selection, properties, memory stats
    streams.py       torch.cuda.Stream / Event on simulated GPUs
    memory.py        per-GPU memory counted from the simulated tensors' storage
    placement.py     the tracer: a TorchFunctionMode that records facts ...
    hooks.py         ... and its module, optimizer, DataLoader and device-question hooks
    simulation.py    logical device labels: GPUs on a host without one
    autocast.py      torch.autocast("cuda") casts for simulated GPU tensors
    checkpoints.py   torch.save / torch.load (map_location) of simulated GPU tensors
    parallel.py      nn.DataParallel's copies between simulated GPUs
    unsimulated.py   the CUDA APIs that say, in one line, that they are not simulated
    wording.py       torch 2.13's own words for a device mismatch (from cuda_device_checks.json)
    messages.py      torch's other error texts, and the line for what is not simulated
    channel.py       the job's pipes to the fork server, and the key the report echoes (asked for last)
    stdio.py         the learner's sys.stdout / sys.stderr put back, and said so, where their code broke them
"""

from __future__ import annotations

import linecache
import os

# Imported here, in the fork server, before any fork: the sandboxed child cannot read project files.
from app.sandbox.harness import channel
from app.sandbox.harness import grade as _grade
from app.sandbox.harness import launch as _launch
from app.sandbox.harness import launchers as _launchers
from app.sandbox.harness import plain as _plain
from app.sandbox.harness import session as _session
from app.sandbox.harness import stdio as _stdio
from app.sandbox.harness import wording as _wording
from app.sandbox.harness.host import Host

_wording.warm_up()


def main(payload: dict, report_fd: int | None, request_key=None) -> int:
    """Run one job described by payload; return the exit code.

    mode "run": run the code and report nothing. mode "grade": run it under the placement tracer and write one
    JSON report of facts to report_fd (see grade.py), echoing the key request_key() returns once everything the
    learner wrote has run (channel.py; None outside a sandboxed job: no key); the verdict is decided outside the
    sandbox. With `nproc` > 1 this process launches that many ranks, as torchrun would, and runs no learner code
    itself (launch.py).
    """
    key_source = request_key or channel.no_key
    if payload.get("launcher"):  # accelerate launch of one process: its environment, no ranks
        os.environ.update(_launchers.of(payload)["env"])
    if int(payload.get("nproc") or 1) > 1:
        return _launch.run(payload, report_fd, key_source)
    if payload.get("mode") == "grade":
        try:
            return _grade.run_grade(payload, report_fd, key_source)
        finally:
            _stdio.flush_streams()
    filename = payload.get("filename", "main.py")
    if request_key is not None:
        channel.close_payload()  # a plain run asks for no key
    if report_fd is not None:
        os.close(report_fd)  # plain runs report nothing beyond their output
    code = payload["code"]
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    if Host.from_payload(payload.get("host")).simulated:
        _session.prepare(payload, filename, grading=False)  # the simulated host; nothing is reported
    status = _plain.run_plain(code, filename)
    _stdio.flush_streams()
    return status
