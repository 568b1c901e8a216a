"""Code that runs INSIDE the sandbox. It imports nothing from `app` outside this package.

`main(payload, report_fd)` is what a sandboxed child calls once it is isolated. The fork server calls `load()`
before forking, so the child never needs to read project files (which its mount namespace hides).

    contract.py      the job's simulated host as the app describes it (machine profiles: machine/machines/)
    plain.py         plain mode: the learner's file as `__main__`, its traceback from its own line on
    grade.py         grading mode: run the learner's file under the tracer, then the exercise's probe; one report
    launch.py        several ranks in one job, as torchrun starts them: the launcher (rank.py: one rank)
    launchers.py     `accelerate launch` instead of torchrun: its environment
    interpreter.py   what `python main.py` gives the learner's script, for each job and each rank: its command
                     line, its folder on sys.path, a random state of its own (not the fork server's)
    warning_lines.py a warning torch gives inside an intercepted call names the learner's line, not the harness's
    report.py        the ranks' reports merged into one
    session.py       one job's simulated host, wired together (both modes); a waiting child may wire the default
                     machine's ahead, before its job comes
    channel.py       the job's pipes to the fork server, and the key the report echoes (asked for last)
    stdio.py         the learner's sys.stdout / sys.stderr put back, and said so, where their code broke them
    tracing/         the placement tracer: placement.py (a TorchFunctionMode that records facts), hooks.py (its
                     module, optimizer, DataLoader and device-question hooks), linemap.py (the facts per line)
    machine/         the simulated machine: host.py (as the payload describes it), builds.py (the torch build the
                     program believes in), devices.py, cuda_runtime.py, cuda_streams.py, memory.py, allocator.py,
                     dataless.py, simulation.py (logical device labels), autocast.py, checkpoints.py, parallel.py,
                     distributed.py, unsimulated.py; machines/ (one profile per machine, and their loader)
    wording/         torch 2.13's own words: wording.py (a device mismatch, from cuda_device_checks.json, made by
                     gen_cuda_checks.py), messages.py (its other error texts, and the line for what is not simulated)
"""

from __future__ import annotations

import linecache
import os

# What a job runs is imported by `load()`, in the fork server before any fork (the sandboxed child cannot read
# project files). Importing this package imports none of it, nor torch: the web process reads `contract` and the
# machine profiles from here and runs no job (it imported torch, torch._dynamo included, for nothing: seconds of
# its start and ~440,000 objects).
from app.harness import channel
from app.harness.contract import JobPayload, SimulatedHost


def load() -> None:
    """Import every part a job runs (torch with them), word one device mismatch and read backward's signatures, so
    that every forked job starts with them loaded; the fork server calls this once, before its first fork."""
    from app.harness import grade, interpreter, launch, launchers, plain, session, stdio  # noqa: F401
    from app.harness.machine import chrome_trace, clock  # noqa: F401
    from app.harness.tracing import hooks
    from app.harness.wording import wording

    wording.warm_up()
    hooks.warm_up()


def prepare_ahead(host: dict, warm=None, spare: bool = False) -> None:
    """In a pre-forked sandbox child, isolated and waiting: warm its pages (warm(), the fork server's own, and the
    simulation's: session.warm_simulation) and build the simulated host and the tracer of a one-process job on
    `host` (a SimulatedHost payload) before the job comes; the fork server then hands this child only a job that
    fits it (contract.fits_ahead). warm None: no warm-up at all, the session only (a child made while the jobs fill
    the sandbox's cores: PreforkPool.refill says why). spare: first fork the process that runs a graded job's first
    copy elsewhere, which builds the session ahead for itself but warms nothing (elsewhere.fork_spare): its copy runs
    beside the graded run and is done long before it, so warming it would only move the copy's page faults ahead, at
    the price of the warm-up loop. With the warm-ups, the session built ahead then rehearses torch's CUDA
    initialisation and undoes it (session.warm_first_placement): the job's first placement runs warm code."""
    from app.harness import elsewhere, grade, session

    if spare:  # before this process warms its pages: those stay its own, not shared with the spare
        elsewhere.fork_spare(lambda: session.ahead(host), grade.serve_spare)
    if warm is not None:  # both warm-ups or neither: the pool leaves them out when the sandbox is busy
        warm()
        session.warm_simulation(host, keep=grade.keep_warm_report)
    session.ahead(host)
    if warm is not None:
        session.warm_seeding()
        session.warm_first_placement()
    grade.warm_report()


def in_own_folder() -> None:
    """The sandbox's job process says its working directory is the job's own (an isolated job's private temp dir,
    app/sandbox/child.py): the learner's file is written there (interpreter.py), never in a folder other jobs or the
    server share."""
    from app.harness import interpreter

    interpreter.OWN_FOLDER = True


def interpreter_ahead() -> None:
    """In a waiting sandbox child, before its job comes: the parts of a new interpreter's state that need no job
    (interpreter.ahead), so that the job's start does not pay for them."""
    from app.harness import interpreter

    interpreter.ahead()


def main(payload: JobPayload, report_fd: int | None, request_key=None, machines: dict[int, int] | None = None) -> int:
    """Run one job described by payload; return the exit code.

    mode "run": run the code and report nothing. mode "grade": run it under the placement tracer and write one
    JSON report of facts to report_fd (see grade.py), echoing the key request_key(meanwhile) returns once everything
    the learner wrote has run, meanwhile() done while the server answers (channel.py; None outside a sandboxed job:
    no key); the verdict is decided outside the sandbox. With `nproc` > 1 this process launches that many ranks, as
    torchrun would, and runs no learner code itself (launch.py); machines: the sandbox's machine keepers, which fork
    the ranks of a job of several machines in each machine's own files (app/sandbox/nodes.py).
    """
    from app.harness import elsewhere as _elsewhere  # each loaded already in the fork server (load())
    from app.harness import grade as _grade
    from app.harness import interpreter as _interpreter
    from app.harness import launch as _launch
    from app.harness import launchers as _launchers
    from app.harness import plain as _plain
    from app.harness import session as _session
    from app.harness import stdio as _stdio
    from app.harness.machine import chrome_trace as _chrome_trace
    from app.harness.machine import clock as _clock

    key_source = request_key or channel.no_key
    # the script's command line, its file in its folder, a random state of its own: not the fork server's
    _interpreter.start(payload.get("filename") or "main.py", payload.get("code"))
    if payload.get("mode") != "grade":
        _elsewhere.drop_spare()  # only a graded run's copy uses it
    if payload.get("launcher"):  # accelerate launch of one process: its environment, no ranks
        os.environ.update(_launchers.of(payload)["env"])
    if int(payload.get("nproc") or 1) > 1:
        return _launch.run(payload, report_fd, key_source, machines)
    if payload.get("mode") == "grade":
        try:
            return _grade.run_grade(payload, report_fd, key_source)
        finally:
            _stdio.flush_streams()
    filename = payload.get("filename", "main.py")
    if request_key is not None:
        channel.close_payload()  # a plain run asks for no key
    tracing = bool(payload.get("trace")) and report_fd is not None
    if report_fd is not None and not tracing:
        os.close(report_fd)  # plain runs report nothing beyond their output ...
    code = payload["code"]
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    if SimulatedHost.from_payload(payload.get("host")).simulated:
        _session.prepare(payload, filename, grading=False)  # the simulated host; nothing is reported
    status = _plain.run_plain(code, filename)
    _stdio.flush_streams()
    if tracing:  # ... but `course run --trace`'s: the simulated clock's timeline (unauthenticated: a local tool's)
        trace = _chrome_trace.timeline(_clock.CLOCK) if _clock.CLOCK.active else None
        _grade.write_json(report_fd, {"chrome_trace": trace})
    return status


def start_rank(payload: JobPayload, index: int, env: dict[str, str], fds: tuple[int, int, int]) -> None:
    """In a process a machine keeper forked: become rank `index` of the job (rank.py). Never returns."""
    from app.harness import launch

    launch.rankmod.start(payload, index, env, fds)
