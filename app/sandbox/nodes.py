"""The simulated machines of a job of several ranks: each machine its own files and its own host name.

A job of `torchrun --nnodes=M` runs M machines in one sandbox. What tells machines apart for a program is their
GPUs (the harness simulates those per rank), their host name, and their files: a checkpoint that machine 1 writes
to /tmp is not on machine 0. Files need a mount namespace per machine, and mounting needs privileges the job has
dropped long before its launcher (app/harness/launch.py) forks a rank. So the job process, while it still holds
them (in `_isolate`, right after it built the job's root), forks one *machine keeper* per machine a job may have
(MAX_NODES). Each keeper:

* unshares a mount and a UTS namespace, mounts a fresh tmpfs on /tmp and /var/tmp (the same size as the job's) and
  names itself `node<g>`, the host name /etc/hosts of the job already maps to its loopback;
* finishes isolating exactly as the job process does (rlimits, uid, capabilities, seccomp: `_isolate`'s rest);
* closes the job's payload, report and status pipes, and serves the launcher over a socket pair: for each request
  (a rank's payload, index and environment, with the rank's three pipe ends as SCM_RIGHTS) it forks twice, so
  that the rank is orphaned to the job's pid 1, the launcher, which reaps it as it reaps its own ranks, and
  answers the rank's pid. The rank runs the harness's `rank.start`, the same as a rank the launcher forks.

The launcher uses the keepers only for jobs of several machines; a job of one machine forks its ranks itself, in
the job's own /tmp, as before. No learner code ever runs in a keeper, and a rank holds no keeper's socket
(rank.start closes every descriptor above its channel). The keepers die with the job: the kernel kills every
process of a pid namespace when its pid 1 exits. In unsafe development mode (no namespaces) there are no keepers
and every machine shares the host's /tmp.
"""

from __future__ import annotations

import json
import os
import socket
import struct

from app.sandbox import isolation

# the most machines a job may have (app/harness/contract.py MAX_NODES; imported there by the harness, which the
# server imports only once it made itself single-threaded, so the number is held equal by a test)
MAX_NODES = 4
NODE = "node{}"  # a machine's host name (app/harness/rank.py NODE)
HEADER = struct.Struct("!Q")  # a request's length, before its JSON
RANK_FDS = 3  # stdout, stderr, channel: the write ends of the rank's pipes


# where keeper g holds the root's binds under /tmp while it mounts its own /tmp: the job's private /dev tmpfs is
# the one writable place in its root at that point. One directory per keeper: the keepers share that tmpfs
# (their mount namespaces are copies, its files are one), and each removes its own before any rank starts
HOLD = "/dev/.held{}"


# the tmpfs each machine has of its own, as two real machines do, with the extra mount flags the job's root gives
# it (isolation.py mounts /dev/shm noexec); what one machine's ranks write there the other's do not see
MACHINE_TMPFS = (("/tmp", 0), ("/var/tmp", 0), ("/dev/shm", isolation.MS_NOEXEC))


def fork_keepers(tmpfs_bytes: int, plan: isolation.RootPlan) -> tuple[int | None, dict[int, socket.socket]]:
    """Fork the machine keepers; call as root in the job's namespaces, after its root is built.

    Returns (None, {machine: the launcher's socket}) in the job process and (g, {g: the keeper's socket}) in
    keeper g, which goes on isolating itself and then calls `serve`."""
    sockets: dict[int, socket.socket] = {}
    for node in range(MAX_NODES):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            for other in sockets.values():
                other.close()
            ours.close()
            _own_machine(node, tmpfs_bytes, plan)
            return node, {node: theirs}
        theirs.close()
        sockets[node] = ours
    return None, sockets


def _own_machine(node: int, tmpfs_bytes: int, plan: isolation.RootPlan) -> None:
    """In keeper g: a mount namespace with its own /tmp, /var/tmp and /dev/shm, and a UTS namespace named node<g>.

    What the job's root bound under /tmp or /var/tmp (a checkout and its venv in /tmp, as a clean clone in CI may
    be) is bound again over the fresh tmpfs, read-only as before; the fresh tmpfs would hide it, and the ranks'
    first lazy import (torch.save's) would fail."""
    isolation.unshare(isolation.CLONE_NEWNS | isolation.CLONE_NEWUTS)
    under = [p for p in [*plan.dirs, *plan.files] if p.startswith(("/tmp/", "/var/tmp/"))]
    held = isolation.hold_binds(under, HOLD.format(node)) if under else []
    for path, flags in MACHINE_TMPFS:
        isolation.mount("tmpfs", path, "tmpfs", isolation.MS_NOSUID | isolation.MS_NODEV | flags,
                        f"size={tmpfs_bytes},mode=1777")
    if under:
        isolation.restore_binds(held, HOLD.format(node))
    socket.sethostname(NODE.format(node))


def serve(sock: socket.socket, start_rank, job_fds: tuple[int, ...]) -> None:
    """In a keeper, isolated: fork the ranks the launcher asks for, until the launcher goes. Never returns.

    start_rank(payload, index, env, fds): the harness's rank.start."""
    for fd in job_fds:  # the job's payload, report and status pipes are the job process's alone
        try:
            os.close(fd)
        except OSError:
            pass
    code = 0
    try:
        while (request := _receive(sock)) is not None:
            message, fds = request
            if "limits" in message:  # the job's own limits, tighter than the pool's (warm children)
                from app.sandbox import warm as warmmod
                from app.sandbox.job_limits import Limits

                warmmod.tighten_rlimits(Limits.from_dict(message["limits"]))
                continue
            _fork_rank(sock, message, fds, start_rank)
    except BaseException:  # noqa: BLE001 - the launcher sees the socket close and says the machine is gone
        code = 1
    os._exit(code)


def _fork_rank(sock: socket.socket, message: dict, fds: list[int], start_rank) -> None:
    """Fork twice: the rank, orphaned to the launcher (pid 1); answer its pid."""
    pid = os.fork()
    if pid == 0:
        try:
            rank = os.fork()
            if rank == 0:
                sock.close()
                start_rank(message["payload"], int(message["index"]), message["env"], tuple(fds))
            sock.sendall(f"{rank}\n".encode())
        finally:
            os._exit(0)
    for fd in fds:
        os.close(fd)
    while True:
        try:
            os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
        except ChildProcessError:
            break


def _receive(sock: socket.socket) -> tuple[dict, list[int]] | None:
    """One request: its length, then its JSON; the rank's pipes ride on its first bytes."""
    head, fds, _, _ = socket.recv_fds(sock, HEADER.size, RANK_FDS)
    if not head:
        return None
    while len(head) < HEADER.size:
        more = sock.recv(HEADER.size - len(head))
        if not more:
            return None
        head += more
    (size,) = HEADER.unpack(head)
    body = bytearray()
    while len(body) < size:
        chunk = sock.recv(min(size - len(body), 1 << 20))
        if not chunk:
            return None
        body += chunk
    return json.loads(body), list(fds)


def tighten(sockets: dict[int, socket.socket], limits: dict) -> None:
    """Give every keeper the job's own limits before the launcher asks it for ranks."""
    data = json.dumps({"limits": limits}).encode()
    for sock in sockets.values():
        sock.sendall(HEADER.pack(len(data)) + data)
