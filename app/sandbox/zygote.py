"""The zygote: the one process that forks job children. It holds nothing of any job, by construction.

A forked child inherits its parent's whole heap. So the process that forks learners' children must never have
held another job's data: not its output, code, payload, key or report. The fork server (server.py) holds all of
those, so it does not fork jobs. Right after preparing (torch warmed up, the harness imported, the isolation
context built), and before its first job, it forks this zygote, which then does one thing in a loop:

    server -> zygote   one datagram: the child's request (limits, uid slot, cgroup directories, warm-up, net)
                       as JSON, with the child's five pipe ends attached (SCM_RIGHTS)
    zygote -> server   one datagram: {"pid": N} (or {"error": text})

For each request it forks the child (child.py) at once and answers with its pid; it reaps its children and
passes each one's fate on to the server, which finishes the job exactly as before. As root, that child is the job
process itself, pid 1 of a fresh pid namespace: the zygote unshares one right before the fork and then rejoins
its own (setns: a process may always return to its own pid namespace), so torch's page tables are copied once
per job, and the zygote reaps the job process itself. It returns after a failed fork too; if the kernel ever
refused the return (as root, only for want of memory), the zygote answers that request with the error and
exits (Stranded), and the server stops so that the runner starts a fresh one: a zygote left outside its own
namespace could fork no job correctly again. The server does not wait for the answer: the fork copies
the page tables of torch's heap (milliseconds, tens of them on a loaded host), and meanwhile the server goes on
reading its jobs' pipes and sending their results. Answers come in the order of the requests (the zygote handles
one at a time), and a child's pid always comes before its fate:

    zygote -> server   {"exit": pid, "status": wait status, "cpu_s": CPU seconds of the child and all it reaped}

Requests carry only what every child of that kind gets anyway, and the zygote learns nothing of a job but its
pid and how it ended: what a child inherits from the zygote is the same for every job. The payload goes from the
server straight into the child's payload pipe, and the key (harness/channel.py) only after the learner's code
has run.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import sys
import traceback

from app.sandbox import isolation
from app.sandbox.job_limits import Limits
from app.sandbox.startup import freeze_heap, log

# bytes; a request is a few hundred bytes of JSON (limits, slot, a cgroup's directories, a GPU slot)
REQUEST_MAX = 1 << 16
# pipe ends attached to one request: stdout, stderr, payload, report, status
FDS_PER_CHILD = 5
# the zygote's exit status when it could not return to its own pid namespace (Stranded); the server logs it
STRANDED_EXIT = 3


class Zygote:
    """The server's handle on its zygote: ask it for a child, collect its children's fates, and stop it."""

    def __init__(self, pid: int, sock: socket.socket) -> None:
        self.pid, self.sock = pid, sock
        self.exits: list[tuple[int, int, float]] = []  # (pid, wait status, CPU seconds) not yet handled
        # answers to requests, in the order the requests were sent: (pid, None) or (None, why it failed)
        self.forked: list[tuple[int | None, str | None]] = []

    @classmethod
    def start(cls, ctx) -> "Zygote":
        """Fork the zygote from the calling (prepared, job-free) server."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            ours.close()
            _serve(ctx, theirs)  # never returns
        theirs.close()
        return cls(pid, ours)

    def request_child(self, request: dict, fds: list[int]) -> None:
        """Ask the zygote to fork one child for this request with these pipe ends; do not wait: its pid (or
        why it failed) is read later, in collect(), into `forked`."""
        socket.send_fds(self.sock, [json.dumps(request).encode()], fds)

    def collect(self) -> bool:
        """Read every answer and fate the zygote sent (the selector saw its socket readable); False once it is
        gone."""
        while True:
            try:
                reply = self._receive(block=False)
            except BlockingIOError:
                return True
            if reply is None:
                return False

    def _receive(self, block: bool) -> dict | None:
        data = self.sock.recv(REQUEST_MAX, 0 if block else socket.MSG_DONTWAIT)
        if not data:
            return None
        reply = json.loads(data)
        if "exit" in reply:
            self.exits.append((int(reply["exit"]), int(reply["status"]), float(reply["cpu_s"])))
        elif "pid" in reply:
            self.forked.append((int(reply["pid"]), None))
        else:
            self.forked.append((None, str(reply.get("error"))))
        return reply

    def stop(self) -> None:
        """Close the socket (the zygote exits when it reads EOF) and make sure it is gone."""
        self.sock.close()
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _serve(ctx, sock: socket.socket) -> None:
    """The zygote's whole life: fork a child per request, report each child's fate, until the server closes the
    socket. Never returns."""
    code = 0
    try:
        isolation.prctl(isolation.PR_SET_PDEATHSIG, signal.SIGKILL)  # never outlive the server
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)  # the server stops us by closing the socket
        wake_r, wake_w = os.pipe()
        keep = sorted({0, 1, 2, sock.fileno(), wake_r, wake_w})
        for low, high in zip(keep, keep[1:] + [os.sysconf("SC_OPEN_MAX")]):
            os.closerange(low + 1, high)  # the runner's socket, the server's selector and wake-up pipe among them
        for fd in (wake_r, wake_w):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        ctx.parent_pidfd = os.pidfd_open(os.getpid())  # the children's parent, whose death must end them
        own_pid_ns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        freeze_heap()
        sel = selectors.DefaultSelector()
        sel.register(sock, selectors.EVENT_READ, "request")
        sel.register(wake_r, selectors.EVENT_READ, "child")
        while True:
            for key, _ in sel.select():
                if key.data == "request":
                    _answer(ctx, sock, own_pid_ns)
                else:
                    _drain(wake_r)
            _report_exits(sock)
    except SystemExit as exc:  # the server closed its socket (0), or the zygote is Stranded
        code = exc.code if isinstance(exc.code, int) else 0
    except BaseException:  # noqa: BLE001 - say why on the server's log, then go: the server notices at once
        traceback.print_exc()
    finally:
        os._exit(code)


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def _report_exits(sock: socket.socket) -> None:
    """Reap every exited child and tell the server how each ended."""
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        # a job's pid 1 reaped every process of its namespace before it exited; an outer child, its job process
        sock.send(json.dumps({"exit": pid, "status": status, "cpu_s": usage.ru_utime + usage.ru_stime}).encode())


def _answer(ctx, sock: socket.socket, own_pid_ns: int) -> None:
    """Take one request and answer it with the new child's pid; exit after answering if the zygote is Stranded."""
    data, fds, _flags, _addr = socket.recv_fds(sock, REQUEST_MAX, FDS_PER_CHILD)
    if not data:
        raise SystemExit(0)  # the server closed its end
    stranded = None
    try:
        request = json.loads(data)
        if len(fds) != FDS_PER_CHILD:
            raise ValueError(f"{len(fds)} pipe ends came with the request, not {FDS_PER_CHILD}")
        reply = {"pid": _fork(ctx, request, fds, own_pid_ns)}
    except Exception as exc:  # noqa: BLE001 - one bad request is refused; the zygote goes on unless Stranded
        log(f"zygote: could not fork a child: {exc}")
        reply = {"error": f"{type(exc).__name__}: {exc}"}
        stranded = exc if isinstance(exc, Stranded) else None
    finally:
        for fd in fds:
            os.close(fd)
    sock.send(json.dumps(reply).encode())
    if stranded is not None:  # the server sees the zygote exit and stops; the runner starts a fresh server
        raise SystemExit(STRANDED_EXIT)


class Stranded(OSError):
    """The zygote could not return to its own pid namespace after unsharing one for a child: every later
    unshare(CLONE_NEWPID) would fail (EINVAL: pid_for_children is no longer its own), and a child forked without one
    would land in the last job's namespace, so the zygote answers this request with the error and exits."""


def _fork(ctx, request: dict, fds: list[int], own_pid_ns: int) -> int:
    """Fork the child of this request (as root, into a pid namespace of its own); return its pid.

    own_pid_ns: a descriptor of the zygote's pid namespace, to return to after the fork, whether it worked or not
    (a failed first fork into a new pid namespace also leaves that namespace unable to take any process). If the
    return fails, raise Stranded, with the child (if any) killed: it would be killed anyway when the zygote exits
    (its PDEATHSIG)."""
    from app.sandbox import child as childmod

    sys.stdout.flush()
    sys.stderr.flush()
    new_ns = childmod.new_pid_namespace(request)
    if new_ns:
        isolation.unshare(isolation.CLONE_NEWPID)  # for the next child only: the zygote itself stays where it is
    try:
        pid = os.fork()
    except BaseException:
        if new_ns:
            _return_to(own_pid_ns, None)
        raise
    if pid == 0:
        try:
            childmod.start_child(ctx, request, fds, Limits)  # never returns
        finally:  # not even by an exception: a second process must never serve the zygote's socket
            os._exit(childmod.SETUP_FAILED)
    if new_ns:
        _return_to(own_pid_ns, pid)
    return pid


def _return_to(own_pid_ns: int, child: int | None) -> None:
    """setns back to the zygote's own pid namespace; raise Stranded (the child killed) if the kernel refuses."""
    try:
        isolation.setns(own_pid_ns, isolation.CLONE_NEWPID)
    except OSError as exc:
        if child is not None:
            os.kill(child, signal.SIGKILL)
        raise Stranded(exc.errno, f"the zygote could not return to its own pid namespace ({exc}); it exits, "
                                  "and the sandbox server restarts with a fresh one") from exc
