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
prepare_ahead). A graded job that has one hands it the program and every machine instead of forking (start), so the
graded run pays neither the fork (~2-3 ms: the page tables of a 230 MB process) nor the copy-on-write faults of the
pages it would share with a copy forked from it (~1,500 more during training-loop's run, ~3 ms): the spare shares
with it only what both still share with the fork server. The spare runs the first machine's copy itself and forks
one child per further machine (runs-on-a-mac has two): those forks and their faults are the spare's, off the graded
run's core. Every copy replies on the spare's one socket (SOCK_SEQPACKET: a record never mixes with another
copy's), each record tagged with its machine's index, so no copy waits on another's reply. The spare is a batch
thread (SPARE_POLICY): handing it the program wakes it, and that wake-up must not take the graded run's core. Any
other job kills it unused (drop_spare). The fork server gives a spare to one waiting child only
(app/sandbox/pools.py), the one it hands graded jobs with copies to.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import socket
import struct
import sys
from dataclasses import dataclass

from app.harness.channel import PAYLOAD_FD, REPORT_FD, STATUS_FD
from app.harness.contract import SimulatedHost
from app.harness.machine.clock import REAL_MONOTONIC
from app.harness.prctl import PR_SET_PDEATHSIG, prctl

# seconds a child may still run after the graded run is done (the sandbox's wall limit stops everything anyway)
ELSEWHERE_BUDGET_S = 5.0
# The spare's scheduling policy. A SCHED_BATCH thread's wake-up never preempts the running thread (sched(7); Linux's
# check_preempt_wakeup_fair returns early for it), with the same share of the CPU as a normal one. The graded run
# wakes its spare by writing the program on a pipe, a "sync" wake-up that may queue the spare on the graded run's own
# core (kernel/sched/fair.c, wake_affine_idle): a normal spare then preempted the graded run there, 2-4 ms off its
# core before it came back (a tick is 4 ms at HZ=250), in 12 of 20 graded training-loop jobs at load average 4
# (bench/README.md, "The spare's wake-up"). A batch spare waits for the other core, or for the graded run's slice.
SPARE_POLICY = os.SCHED_BATCH
# a record on the spare's socket: its machine's index, whether it is the reply's last, then up to RECORD bytes of it
# (a reply of any length goes in several; one record must fit the socket's send buffer, ~200 KB by default)
HEADER = struct.Struct("<HB")
RECORD = 1 << 15


@dataclass
class Spare:
    """The process forked ahead for a job's first copy: its pid, where it reads the program, where it replies."""

    pid: int
    command: int  # write end: the program and its machines (JSON), then the end of file
    reply: int  # the graded run's end of the spare's socket: how the program ended on each machine, in records


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
    reply_r, reply_w = _reply_socket()
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


def _give_spare(machines: list[dict], job: dict) -> Spare | None:
    """Hand the spare the program for `machines`; None (the spare dropped) when it cannot take it: it is gone, or
    the program does not fit in its pipe at once (the graded run never waits on its spare)."""
    global _SPARE
    spare, _SPARE = _SPARE, None
    data = json.dumps({**job, "machines": machines}).encode()
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
        self.spare: tuple[list[dict], Spare] | None = None  # the machines the spare runs, and the spare

    def start(self, machines: list[dict], run, job: dict | None = None) -> None:
        """Fork one child per machine ({"id", "title", "host": SimulatedHost payload}); run(host) runs the
        learner's file on that host in the child and returns how it ended (grade._run_learner's outcome).
        job: what the spare needs to run the program itself ({"code", "filename", "host"}); with it, every
        machine goes to this process's spare, if it has one (fork_spare), and none is forked here."""
        if job is not None and _SPARE is not None and machines:
            spare = _give_spare(machines, job)
            if spare is not None:
                self.spare = (machines, spare)
                return
        drop_spare()
        for machine in machines:
            read_fd, write_fd = _reply_socket()
            pid = os.fork()
            if pid == 0:  # the child: never returns
                os.close(read_fd)
                _child(machine, write_fd, run)
            os.close(write_fd)
            self.children.append((machine, pid, read_fd))

    def collect(self) -> list[dict]:
        """How the program ended on each machine: {"machine", "title", "finished", "exception"}."""
        deadline = REAL_MONOTONIC() + ELSEWHERE_BUDGET_S  # real time: the program's clocks are modeled
        replies = []
        if self.spare is not None:
            machines, spare = self.spare
            got = _receive(spare.reply, len(machines), deadline)
            os.close(spare.reply)
            _stop(spare.pid)  # and so its forked copies still running (PR_SET_PDEATHSIG)
            replies += [(machine, got.get(i, b"")) for i, machine in enumerate(machines)]
        for machine, pid, fd in self.children:
            got = _receive(fd, 1, deadline)
            os.close(fd)
            _stop(pid)
            replies.append((machine, got.get(0, b"")))
        out = []
        for machine, data in replies:
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
        _send(write_fd, 0, run(SimulatedHost.from_payload(machine["host"])))
    except BaseException:
        status = 1
    finally:
        os._exit(status)


def _spare(command_fd: int, write_fd: int, prepare, serve) -> None:
    """The spare's whole life: prepare, wait for the program (none: the end of file, or killed), fork one copy per
    machine after the first, run the first machine's itself, reply, wait for its copies, exit."""
    status = 0
    copies = []
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
            machines, spare = command["machines"], os.getpid()
            for index, machine in enumerate(machines[1:], 1):  # before the spare's own run: each starts clean
                pid = os.fork()
                if pid == 0:  # never returns
                    _spare_copy(spare, index, machine, command, write_fd, serve)
                copies.append(pid)
            _send(write_fd, 0, serve(command, SimulatedHost.from_payload(machines[0]["host"])))
    except BaseException:
        status = 1
    finally:
        for pid in copies:  # the spare's exit would stop them (PR_SET_PDEATHSIG) before they replied
            try:
                os.waitpid(pid, 0)
            except (ChildProcessError, InterruptedError):
                pass
        os._exit(status)


def _spare_copy(spare: int, index: int, machine: dict, command: dict, write_fd: int, serve) -> None:
    """In a copy the spare forked: run the program on `machine`, silently, as the spare would; reply; exit. It dies
    with the spare, which the graded run stops once it has every reply or its budget is spent (collect), as it stops
    a copy it forked itself."""
    status = 0
    try:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != spare:  # the spare was stopped before the line above: nobody reads the reply
            os._exit(0)
        _silence()
        _send(write_fd, index, serve(command, SimulatedHost.from_payload(machine["host"])))
    except BaseException:
        status = 1
    finally:
        os._exit(status)


def _ended(outcome: dict) -> bytes:
    """How the program ended (the facts the check reads), as a copy sends it."""
    exc = outcome.get("exception")
    ended = {"finished": bool(outcome.get("finished")),
             "exception": None if not exc else {k: exc.get(k) for k in ("type", "message", "line")}}
    return json.dumps(ended, default=str).encode()


def _send(write_fd: int, index: int, outcome: dict) -> None:
    """In a copy: send how the program ended on machine `index` (0 in a copy the graded run forked, which has a
    socket of its own), in records of at most RECORD bytes."""
    data = _ended(outcome)
    for start in range(0, len(data), RECORD):  # json.dumps wrote at least "{}"
        last = start + RECORD >= len(data)
        os.write(write_fd, HEADER.pack(index, last) + data[start:start + RECORD])  # one record, whole


def _receive(fd: int, count: int, deadline: float) -> dict[int, bytes]:
    """The replies of the copies writing on `fd`, by machine index, as each is whole: until all `count` are, the end
    of file (every copy gone), or the deadline; one missing is unfinished, which decides nothing."""
    parts: dict[int, list[bytes]] = {}
    whole: dict[int, bytes] = {}
    while len(whole) < count:
        left = deadline - REAL_MONOTONIC()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        record = os.read(fd, HEADER.size + RECORD)
        if len(record) < HEADER.size:  # the end of file
            break
        index, last = HEADER.unpack_from(record)
        parts.setdefault(index, []).append(record[HEADER.size:])
        if last and index < count:  # a record of no copy's (the learner's code may hold the socket) counts not
            whole[index] = b"".join(parts.pop(index))
    return whole


def _reply_socket() -> tuple[int, int]:
    """A copy's reply channel (read end, write end): a SOCK_SEQPACKET pair, whose records _send writes and _receive
    reads whole, so a reply never mixes with another copy's and is taken as soon as its last record is there, not at
    the end of file (which comes after the copy's exit, or never while a process the learner's code started there
    holds the socket)."""
    read, write = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    return read.detach(), write.detach()
