"""The learner's program on the other machines a check names ("so the script also runs without a GPU").

A script written for one machine should run on every machine a learner owns: a laptop without a GPU, an Apple
silicon Mac. Before the graded run starts, the harness forks one child per other machine; each child switches the
simulated host to that machine (Availability.scenario, the same switch a probe uses), runs the learner's file with
its output discarded, and sends back how it ended: finished, or the exception with the learner's line. The
children run beside the graded run, so the extra cost is the slower of them, not their sum; one still running
when the graded run is done gets what is left of ELSEWHERE_BUDGET_S and is then stopped (reported as unfinished,
which fails nothing).

Forked after session.prepare: the child inherits the tracer and the simulated host, and its exit is os._exit
(no finalisers, no report of its own). Where the job has a real GPU nothing is forked: a real CUDA device cannot
be hidden from the program.

The spare: a waiting sandbox child that builds its session ahead may fork the first copy's process before its job
comes, before it warms its pages (fork_spare); the spare builds its own session and waits for the program (it warms
no pages: its copy is done long before the graded run, so that would only cost CPU; app/harness/__init__.py
prepare_ahead). A graded job that has one hands it the program instead of forking (start), so the graded run pays
neither the fork (~2-3 ms: the page tables of a 230 MB process) nor the copy-on-write faults of the pages it
would share with a copy forked from it (~1,500 more during training-loop's run, ~3 ms): the spare shares with it
only what both still share with the fork server. The spare is a batch thread (SPARE_POLICY): handing it the
program wakes it, and that wake-up must not take the graded run's core. Any other job kills it unused (drop_spare).
The fork server gives a spare to one waiting child only (app/sandbox/pools.py), the one it hands graded jobs with
copies to.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import sys
from dataclasses import dataclass

from app.harness.channel import PAYLOAD_FD, REPORT_FD, STATUS_FD
from app.harness.contract import SimulatedHost
from app.harness.machine.clock import REAL_MONOTONIC

# seconds a child may still run after the graded run is done (the sandbox's wall limit stops everything anyway)
ELSEWHERE_BUDGET_S = 5.0
# The spare's scheduling policy. A SCHED_BATCH thread's wake-up never preempts the running thread (sched(7); Linux's
# check_preempt_wakeup_fair returns early for it), with the same share of the CPU as a normal one. The graded run
# wakes its spare by writing the program on a pipe, a "sync" wake-up that may queue the spare on the graded run's own
# core (kernel/sched/fair.c, wake_affine_idle): a normal spare then preempted the graded run there, 2-4 ms off its
# core before it came back (a tick is 4 ms at HZ=250), in 12 of 20 graded training-loop jobs at load average 4
# (bench/README.md, "The spare's wake-up"). A batch spare waits for the other core, or for the graded run's slice.
SPARE_POLICY = os.SCHED_BATCH
END = b"\n"  # ends a child's reply: json.dumps writes no newline of its own


@dataclass
class Spare:
    """The process forked ahead for a job's first copy: its pid, where it reads the program, where it replies."""

    pid: int
    command: int  # write end: the program (JSON), then the end of file
    reply: int  # read end: how the program ended, as a forked copy says it


# this process's spare, until a job uses or drops it; None: none (not a waiting child, or given away)
_SPARE: Spare | None = None


def fork_spare(prepare, serve) -> None:
    """In a waiting sandbox child, before it warms its pages: fork the process that runs the first copy of a graded
    program elsewhere. In it, prepare() does what the waiting child does next (warm its pages, build the session
    ahead), then it waits for the program, and serve(command, host) runs it on that host and returns how it ended
    (grade._run_learner's outcome). It has no stdout or stderr and none of the server's pipes: what the copy does
    there is the graded run's alone (the key, an exit code, a report), as in a forked copy."""
    global _SPARE
    command_r, command_w = os.pipe()
    reply_r, reply_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the spare: never returns
        os.close(command_w)
        os.close(reply_r)
        # above the server's pipes, which _silence() covers (outside a sandbox, fds 3-5 may be these pipes)
        command_r, reply_w = (fcntl.fcntl(fd, fcntl.F_DUPFD, STATUS_FD + 1) for fd in (command_r, reply_w))
        _spare(command_r, reply_w, prepare, serve)
    os.close(command_r)
    os.close(reply_w)
    _SPARE = Spare(pid, command_w, reply_r)


def drop_spare() -> None:
    """A job that needs no copy: stop the spare now, so its teardown is not the job's exit's."""
    global _SPARE
    spare, _SPARE = _SPARE, None
    if spare is not None:
        for fd in (spare.command, spare.reply):
            os.close(fd)
        _stop(spare.pid)


def _give_spare(machine: dict, job: dict) -> Spare | None:
    """Hand the spare the program for `machine`; None (the spare dropped) when it cannot take it: it is gone, or
    the program does not fit in its pipe at once (the graded run never waits on its spare)."""
    global _SPARE
    spare, _SPARE = _SPARE, None
    data = json.dumps({**job, "machine": machine}).encode()
    try:
        if len(data) > fcntl.fcntl(spare.command, fcntl.F_GETPIPE_SZ):
            fcntl.fcntl(spare.command, fcntl.F_SETPIPE_SZ, len(data))
        view = memoryview(data)
        while view:
            view = view[os.write(spare.command, view):]
    except OSError:  # gone (it failed to prepare), or no pipe that large: a forked copy instead
        _SPARE = spare
        drop_spare()
        return None
    os.close(spare.command)
    return spare


class Elsewhere:
    """The forked runs: start them, then collect what they say."""

    def __init__(self):
        self.children: list[tuple[dict, int, int]] = []  # (machine, pid, read fd)

    def start(self, machines: list[dict], run, job: dict | None = None) -> None:
        """Fork one child per machine ({"id", "title", "host": SimulatedHost payload}); run(host) runs the
        learner's file on that host in the child and returns how it ended (grade._run_learner's outcome).
        job: what the spare needs to run the program itself ({"code", "filename", "host"}); with it, the first
        machine goes to this process's spare, if it has one (fork_spare), and is not forked."""
        if job is not None and _SPARE is not None and machines:
            spare = _give_spare(machines[0], job)
            if spare is not None:
                self.children.append((machines[0], spare.pid, spare.reply))
                machines = machines[1:]
        drop_spare()
        for machine in machines:
            read_fd, write_fd = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: never returns
                os.close(read_fd)
                _child(machine, write_fd, run)
            os.close(write_fd)
            self.children.append((machine, pid, read_fd))

    def collect(self) -> list[dict]:
        """How the program ended on each machine: {"machine", "title", "finished", "exception"}."""
        deadline = REAL_MONOTONIC() + ELSEWHERE_BUDGET_S  # real time: the program's clocks are modeled
        out = []
        for machine, pid, fd in self.children:
            data = _read_until(fd, deadline)
            os.close(fd)
            _stop(pid)
            try:
                ended = json.loads(data) if data else {}
            except ValueError:
                ended = {}
            out.append({"machine": machine["id"], "title": machine.get("title") or machine["id"],
                        "finished": ended.get("finished"), "exception": ended.get("exception"),
                        "completed": bool(ended)})
        return out


def _stop(pid: int) -> None:
    """Kill a child and reap it if it is gone already. One that has said how it ended may still be tearing down
    its copy of the job's memory (a few ms of CPU): the graded run does not wait for that; the job's end reaps it
    (the sandbox's server is the subreaper of what a job leaves)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _silence() -> None:
    """No stdout, stderr or server pipes for a copy: the server's pipes too, as what the program writes or asks
    for there (the key, an exit code, a report) is the graded run's alone; a copy that could ask first would win
    the key and void the graded run's report, a race between two copies of one program
    (tests/security/test_job_isolation.py)."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (1, 2, PAYLOAD_FD, REPORT_FD, STATUS_FD):
        os.dup2(devnull, fd)
    os.close(devnull)
    sys.stdout = sys.stderr = open(os.devnull, "w")


def _child(machine: dict, write_fd: int, run) -> None:
    """Run the program on another machine, silently; write how it ended; exit."""
    status = 0
    try:
        _silence()
        _reply(write_fd, run(SimulatedHost.from_payload(machine["host"])))
    except BaseException:
        status = 1
    finally:
        os._exit(status)


def _spare(command_fd: int, write_fd: int, prepare, serve) -> None:
    """The spare's whole life: prepare, wait for the program (none: the end of file, or killed), run it, reply,
    exit."""
    status = 0
    try:
        _silence()
        try:
            os.sched_setscheduler(0, SPARE_POLICY, os.sched_param(0))
        except OSError:  # a host that refuses it: the spare still runs, as a normal thread
            pass
        prepare()
        chunks = []
        while chunk := os.read(command_fd, 1 << 16):
            chunks.append(chunk)
        if chunks:
            command = json.loads(b"".join(chunks))
            _reply(write_fd, serve(command, SimulatedHost.from_payload(command["machine"]["host"])))
    except BaseException:
        status = 1
    finally:
        os._exit(status)


def _reply(write_fd: int, outcome: dict) -> None:
    """Write how the program ended (the facts the check reads), ended with END: the graded run reads no further."""
    exc = outcome.get("exception")
    ended = {"finished": bool(outcome.get("finished")),
             "exception": None if not exc else {k: exc.get(k) for k in ("type", "message", "line")}}
    data = json.dumps(ended, default=str).encode() + END
    view = memoryview(data)
    while view:
        view = view[os.write(write_fd, view):]


def _read_until(fd: int, deadline: float) -> bytes:
    """The child's reply, once it ends with END (a newline JSON never holds), or at end of file; b"" when the
    deadline comes first. Not waiting for the end of file spares the graded run the child's exit, and any process
    the learner's code started there that still holds the pipe."""
    chunks = []
    while True:
        left = deadline - REAL_MONOTONIC()
        if left <= 0:
            return b""  # still running: unfinished, which decides nothing
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            return b""
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        if chunk.endswith(END):
            return b"".join(chunks)
