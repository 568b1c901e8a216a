"""Several ranks in one job, started the way `torchrun --standalone --nproc-per-node=N` starts them.

The job's own process (already isolated, pid 1 of the job's namespaces, torch imported by the fork server) is
the launcher; it runs no learner code. It

* forks a store keeper: the TCPStore at MASTER_ADDR:MASTER_PORT where the ranks' `init_process_group` meet,
  held outside the ranks as torchrun's agent holds it (TORCHELASTIC_USE_AGENT_STORE=True), so rank 0 finishing
  first does not take the store from the others;
* forks N ranks from its own warm state (no interpreter starts) with torchrun's environment (rank.py);
* passes their output on line by line, prefixed `[default<r>]:` as `torchrun --tee 3` does;
* when a rank fails, shows that rank's traceback first, then stops the others (SIGTERM, SIGKILL after a grace),
  as torchrun's agent does, and ends with torchrun's summary of the failure; the job then exits 1;
* in grading mode merges the ranks' reports into the one report the grader reads, echoing the job's key,
  which it asks the fork server for only once every rank is gone (channel.py; report.py). No rank can reach
  the launcher's pipes (rank.py closes them) or its memory (the launcher is not dumpable).

The ranks talk over the loopback of the job's own network namespace (the fork server brought it up and gave the
job the seccomp variant that allows it); everything the job is limited by (processes, memory, CPU, the wall
clock) it shares with its ranks: they are processes of the job, in its cgroups.
"""

from __future__ import annotations

import datetime
import json
import os
import selectors
import signal
import socket
import struct
import sys
import time
import uuid

from app.harness import launchers
from app.harness import rank as rankmod
from app.harness import report as reportmod
from app.harness.contract import JobPayload
from app.harness.prctl import PR_SET_DUMPABLE, prctl

# seconds a stopped rank has between SIGTERM and SIGKILL (torchrun's agent waits 30 s; a sandbox job's whole
# wall clock is seconds, and Python's default SIGTERM ends a rank at once)
STOP_GRACE_S = 1.0
# seconds between looks at the ranks when nothing happens (SIGCHLD wakes the launcher sooner)
POLL_S = 0.1
# bytes read from a rank's pipe at once, and the longest piece of a line passed on as one prefixed line
READ_CHUNK = 1 << 16
LINE_CHUNK = 8 << 10
# seconds the store keeper's TCPStore waits for a client before giving up (the job's wall clock ends sooner)
STORE_TIMEOUT = datetime.timedelta(seconds=300)
# a request to a machine keeper starts with its length (app/sandbox/nodes.py HEADER; a test holds them equal)
MACHINE_HEADER = struct.Struct("!Q")


class Rank:
    """The launcher's view of one rank process."""

    def __init__(self, index: int, pid: int, fds: dict[str, int], local: int | None = None,
                 node: int | None = None, template: str = "[default{local}]:") -> None:
        self.template = template  # the launcher's line prefix (launchers.py)
        self.index, self.pid, self.fds = index, pid, fds  # fds: stdout, stderr, channel (read ends)
        self.local = index if local is None else local  # LOCAL_RANK
        self.node = node  # GROUP_RANK on a job of several machines; None on one machine
        self.pending = {"stdout": bytearray(), "stderr": bytearray(), "channel": bytearray()}
        self.status: int | None = None  # wait status once reaped
        self.ended: float | None = None  # when it was reaped (wall clock): the failure's `time` in torchrun's summary
        self.traceback: str | None = None
        self.failed_at: float | None = None
        self.report: dict | None = None
        self.chrome_trace: dict | None = None  # `course run --trace`: its modeled timeline (rank.py)
        self.stopped = False  # the launcher stopped it because another rank failed
        self.shown = False  # its traceback was passed on

    @property
    def prefix(self) -> bytes:
        """torchrun's `[default<local rank>]:`; on several machines, the machine's name first (each machine's
        agent prints its own ranks' lines, and the job's output holds every machine's)."""
        machine = "" if self.node is None else rankmod.NODE.format(self.node) + ": "
        return (machine + self.template.format(local=self.local, rank=self.index)).encode()

    @property
    def failed(self) -> bool:
        return self.status is not None and self.status != 0


class Launcher:
    """Start the store keeper and the ranks, pass their output on, stop them as torchrun does."""

    def __init__(self, payload: dict, nproc: int, machines: dict[int, int] | None = None) -> None:
        self.payload, self.nproc = payload, nproc
        # the sandbox's machine keepers (app/sandbox/nodes.py): machine -> socket; none outside a sandbox
        self.machines = {g: socket.socket(fileno=fd) for g, fd in (machines or {}).items()}
        self.nnodes = max(1, int(payload.get("nnodes") or 1))
        self.launcher = launchers.of(payload)
        self.ranks: list[Rank] = []
        self.by_pid: dict[int, Rank] = {}
        self.keeper: int | None = None
        self.root: Rank | None = None  # the first rank that failed
        self.kill_at: float | None = None
        self.sel = selectors.DefaultSelector()

    # ---------------------------------------------------------------- start
    def start(self) -> None:
        """Fork the store keeper, then the ranks."""
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.sel.register(wake_r, selectors.EVENT_READ, None)
        port = self._start_store()
        run_id = str(uuid.uuid4())  # what --standalone makes its rendezvous id
        for index in range(self.nproc):
            env = rankmod.environment(index, self.nproc, port, run_id, self.nnodes)
            self._start_rank(index, {**env, **self.launcher["env"]})

    def _start_store(self) -> int:
        """Fork the process that holds the group's TCPStore; return its port."""
        port_r, port_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _keep_store(port_w)
        os.close(port_w)
        self.keeper = pid
        data = b""
        while chunk := os.read(port_r, 64):
            data += chunk
        os.close(port_r)
        if not data.strip().isdigit():
            raise RuntimeError(f"the ranks' store did not start: {data.decode(errors='replace')[-300:]}")
        return int(data)

    def _start_rank(self, index: int, env: dict[str, str]) -> None:
        pipes = {kind: os.pipe() for kind in ("stdout", "stderr", "channel")}
        node = int(env["GROUP_RANK"])
        if self.nnodes > 1 and node in self.machines:  # its machine's keeper forks it, in that machine's files
            pid = self._ask_machine(node, index, env, [w for _, w in pipes.values()])
        else:
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                rankmod.start(self.payload, index, env, tuple(w for _, w in pipes.values()))
        fds = {}
        for kind, (r, w) in pipes.items():
            os.close(w)
            os.set_blocking(r, False)
            fds[kind] = r
        rank = Rank(index, pid, fds, local=int(env["LOCAL_RANK"]),
                    node=int(env["GROUP_RANK"]) if self.nnodes > 1 else None, template=self.launcher["prefix"])
        for kind, fd in fds.items():
            self.sel.register(fd, selectors.EVENT_READ, (rank, kind))
        self.ranks.append(rank)
        self.by_pid[pid] = rank

    def _ask_machine(self, node: int, index: int, env: dict[str, str], fds: list[int]) -> int:
        """Have machine `node`'s keeper fork rank `index` with these pipes (app/sandbox/nodes.py's protocol: the
        request's length and JSON, the pipes riding on its first bytes); return the rank's pid. The rank is
        orphaned to this process, pid 1 of the job, which reaps it as it reaps its own."""
        sock = self.machines[node]
        data = json.dumps({"payload": self.payload, "index": index, "env": env}).encode()
        socket.send_fds(sock, [MACHINE_HEADER.pack(len(data))], fds)
        sock.sendall(data)
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = sock.recv(64)
            if not chunk:
                raise RuntimeError(f"machine {rankmod.NODE.format(node)} did not start rank {index}")
            answer += chunk
        return int(answer)

    # ---------------------------------------------------------------- supervise
    def supervise(self) -> None:
        """Pass output on and watch the ranks until every one has exited; then stop the store keeper."""
        while any(r.status is None for r in self.ranks):
            timeout = POLL_S if self.kill_at is None else max(0.0, min(POLL_S, self.kill_at - time.monotonic()))
            for key, _ in self.sel.select(timeout):
                if key.data is None:
                    _drain_wakeups(key.fd)
                elif key.fd in self.sel.get_map():
                    self._read(*key.data)
            self._reap()
            if self.kill_at is not None and time.monotonic() >= self.kill_at:
                for r in self.ranks:
                    if r.status is None:
                        _signal(r.pid, signal.SIGKILL)
        if self.keeper is not None:
            _signal(self.keeper, signal.SIGKILL)
            _wait(self.keeper)
        if self.root is not None:
            _write(2, reportmod.failure_summaries(self.payload.get("filename") or "main.py", self.root, self.ranks))

    def _read(self, rank: Rank, kind: str) -> bool:
        """Read what a rank wrote on one pipe; False at its end (or nothing there)."""
        fd = rank.fds[kind]
        try:
            data = os.read(fd, READ_CHUNK)
        except BlockingIOError:
            return False
        if not data:
            self.sel.unregister(fd)
            return False
        buf = rank.pending[kind]
        buf += data
        if kind == "channel":
            self._messages(rank)
        else:
            self._lines(rank, kind, final=False)
        return True

    def _lines(self, rank: Rank, kind: str, final: bool) -> None:
        """Pass on the complete lines of a rank's stdout or stderr, each with its prefix."""
        buf, out = rank.pending[kind], bytearray()
        while (nl := buf.find(b"\n")) >= 0 or len(buf) >= LINE_CHUNK or (final and buf):
            end = nl if 0 <= nl < LINE_CHUNK else min(len(buf), LINE_CHUNK)
            out += rank.prefix + bytes(buf[:end]) + b"\n"
            del buf[: end + 1 if end == nl else end]
        if out:
            _write(1 if kind == "stdout" else 2, bytes(out))

    def _messages(self, rank: Rank) -> None:
        """Take the complete JSON lines a rank sent on its channel."""
        buf = rank.pending["channel"]
        while (nl := buf.find(b"\n")) >= 0:
            line = bytes(buf[:nl])
            del buf[: nl + 1]
            message = reportmod.parse_message(line)
            if "traceback" in message and rank.traceback is None:
                rank.traceback, rank.failed_at = str(message["traceback"]), message.get("at")
            elif isinstance(message.get("report"), dict) and rank.report is None:
                rank.report = message["report"]
            elif isinstance(message.get("chrome_trace"), dict) and rank.chrome_trace is None:
                rank.chrome_trace = message["chrome_trace"]

    def _reap(self) -> None:
        """Collect exited processes (ranks, and whatever a rank left behind: this is the namespace's init)."""
        exited: list[Rank] = []
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            rank = self.by_pid.get(pid)
            if rank is not None and rank.status is None:
                rank.status, rank.ended = status, time.time()
                self._drain(rank)
                exited.append(rank)
        failed = sorted((r for r in exited if r.failed), key=lambda r: (r.failed_at or time.monotonic(), r.index))
        if failed and self.root is None:
            self._failure(failed[0])
        for rank in failed:
            self._show_traceback(rank)

    def _drain(self, rank: Rank) -> None:
        """Read what an exited rank left in its pipes; a process it left behind may hold them open: stop there."""
        for kind in ("stdout", "stderr", "channel"):
            while rank.fds[kind] in self.sel.get_map() and self._read(rank, kind):
                pass
            if rank.fds[kind] in self.sel.get_map():
                self.sel.unregister(rank.fds[kind])
            os.close(rank.fds[kind])
            if kind != "channel":
                self._lines(rank, kind, final=True)

    def _failure(self, root: Rank) -> None:
        """The first rank failed: show its traceback first, then stop the others, as torchrun's agent does."""
        self.root = root
        self._show_traceback(root)
        for r in self.ranks:
            if r.status is None:
                r.stopped = True
                _signal(r.pid, signal.SIGTERM)
        self.kill_at = time.monotonic() + STOP_GRACE_S

    def _show_traceback(self, rank: Rank) -> None:
        if rank.traceback and not rank.shown:
            rank.shown = True
            text = rank.traceback if rank.traceback.endswith("\n") else rank.traceback + "\n"
            _write(2, b"".join(rank.prefix + line.encode() + b"\n" for line in text[:-1].split("\n")))

    # ---------------------------------------------------------------- the end
    def exit_code(self) -> int:
        """0 when every rank exited 0; otherwise 1, as torchrun exits."""
        return 0 if all(r.status == 0 for r in self.ranks) else 1


def run(payload: JobPayload, report_fd: int | None, request_key, machines: dict[int, int] | None = None) -> int:
    """Launch the payload's `nproc` ranks, supervise them, write the job's one report; return the exit code.

    machines: the sandbox's machine keepers (machine -> socket fd), which fork the ranks of a job of several
    machines in each machine's own files; without them every rank is forked here."""
    nproc = int(payload["nproc"])
    # a rank may signal the launcher (pid 1 here, so only signals it handles arrive): SIGINT must not stop it
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # the ranks run as our uid: not dumpable, /proc/1/fd and /proc/1/mem are not theirs to open
    prctl(PR_SET_DUMPABLE, 0)
    launcher = Launcher(payload, nproc, machines)
    launcher.start()
    launcher.supervise()
    if report_fd is not None:
        if payload.get("mode") == "grade":  # every rank has exited: only now does the key come into this process
            reportmod.write(report_fd, reportmod.merge(payload, launcher.ranks, launcher.root, request_key()))
        elif payload.get("trace"):  # `course run --trace`: every rank's timeline in one trace (no key: a local tool's)
            reportmod.write_plain(report_fd, {"chrome_trace": reportmod.merge_traces(launcher.ranks)})
        else:
            os.close(report_fd)
    return launcher.exit_code()


def _keep_store(port_w: int) -> None:
    """In the store keeper: hold the TCPStore the ranks meet at until the launcher stops us. Never returns."""
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.closerange(3, port_w)  # the job's report and status pipes among them
        os.closerange(port_w + 1, rankmod.MAX_FD)
        import torch.distributed as dist

        store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=STORE_TIMEOUT)
        os.write(port_w, str(store.port).encode())
        os.close(port_w)
        while True:
            signal.pause()
    except BaseException as exc:  # say why on the pipe the launcher reads, then exit
        try:
            os.write(port_w, f"{type(exc).__name__}: {exc}".encode())
        finally:
            os._exit(1)


def _drain_wakeups(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def _write(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _wait(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
