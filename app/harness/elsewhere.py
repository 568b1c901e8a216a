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
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys

from app.harness.channel import PAYLOAD_FD, REPORT_FD, STATUS_FD
from app.harness.contract import SimulatedHost
from app.harness.machine.clock import REAL_MONOTONIC

# seconds a child may still run after the graded run is done (the sandbox's wall limit stops everything anyway)
ELSEWHERE_BUDGET_S = 5.0
END = b"\n"  # ends a child's reply: json.dumps writes no newline of its own


class Elsewhere:
    """The forked runs: start them, then collect what they say."""

    def __init__(self):
        self.children: list[tuple[dict, int, int]] = []  # (machine, pid, read fd)

    def start(self, machines: list[dict], run) -> None:
        """Fork one child per machine ({"id", "title", "host": SimulatedHost payload}); run(host) runs the
        learner's file on that host in the child and returns how it ended (grade._run_learner's outcome)."""
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


def _child(machine: dict, write_fd: int, run) -> None:
    """Run the program on another machine, silently; write how it ended; exit."""
    status = 0
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        # the server's pipes too: what the program writes or asks for there (the key, an exit code, a report)
        # is the graded run's alone; a child that could ask first would win the key and void the graded run's
        # report, a race between two copies of one program (tests/security/test_job_isolation.py)
        for fd in (1, 2, PAYLOAD_FD, REPORT_FD, STATUS_FD):
            os.dup2(devnull, fd)
        sys.stdout = sys.stderr = open(os.devnull, "w")
        outcome = run(SimulatedHost.from_payload(machine["host"]))
        exc = outcome.get("exception")
        ended = {"finished": bool(outcome.get("finished")),
                 "exception": None if not exc else {k: exc.get(k) for k in ("type", "message", "line")}}
        data = json.dumps(ended, default=str).encode() + END  # its end: the parent reads no further
        view = memoryview(data)
        while view:
            view = view[os.write(write_fd, view):]
    except BaseException:
        status = 1
    finally:
        os._exit(status)


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
