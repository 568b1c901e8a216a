"""Fork one job process from the zygote and isolate it before it sees any learner code.

Process tree of one job (root mode):

    fork server (supervisor: holds the jobs' output, reads their pipes, enforces limits; forks no job)
      └─ zygote (warm torch, the prepared context; holds nothing of any job: zygote.py; reaps the job processes
         and passes their fates on to the server)
           └──fork──> job process: pid 1 of its own pid namespace (the zygote unshares one for it right before the
                      fork); joins the job's cgroups, unshares the other namespaces, builds the read-only root,
                      sets rlimits, drops to the slot's uid, loads seccomp, then blocks until the server writes
                      the job's payload, and runs the harness.

When the job process exits, the kernel kills every other process in its pid namespace, so daemons cannot
outlive a job; the server's cgroup sweep catches anything else. The zygote reaps the job process itself, so the
server reads its own exit code or signal and CPU time. The job process forks nothing it does not need: an
intermediate process here would copy torch's page tables a second time for every job (~3 ms of CPU, bench/README
"The machine's CPU per graded job, by stage") and free them again at its exit.

Without root (user-namespace mode) an outer child stands between the zygote and the job process: it unshares a
user namespace, which cannot be undone in the zygote, with the job's namespaces under it, forks the job process
(pid 1 of the new pid namespace) and re-raises its fate (exit code or signal). In unsafe development mode (no
namespaces) the zygote's child is the job process, in a session of its own that the server kills by group.

File descriptors of the job process: 0 stdin at EOF, 1 stdout pipe, 2 stderr pipe, 3 payload pipe (the payload,
length first; later the job's key, see app/harness/channel.py), 4 report pipe (its first byte, b"R",
tells the server isolation is complete; the harness writes after it), 5 status pipe (the key request, and the
exit code, written after the output is flushed: the server answers without waiting for the exit of a process
that maps all of torch, which takes longer than the job itself on a busy machine).
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import resource
import select
import signal
import socket
import sys
import traceback
from dataclasses import dataclass, field

from app.sandbox import isolation, nodes, startup
from app.sandbox import warm as warmmod

# the app package's directory: a job's root hides its files (the fork server's modules, the harness's)
APP_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep

# the same numbers as app/harness/channel.py (a test holds them equal; importing the harness here would
# import torch before the server has made it single-threaded)
PAYLOAD_FD, REPORT_FD, STATUS_FD = 3, 4, 5
READY = b"R"

# exit code of a child whose isolation failed before any learner code ran
SETUP_FAILED = 125
# bytes; the payload pipe is enlarged so the server's write never blocks (source <= 64 KiB + grading spec)
PAYLOAD_PIPE_BYTES = 1 << 20
# niceness of every job process (0 = the web server's; 19 = lowest): learners' code yields to page requests
JOB_NICE = 10
CLEAN_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "OMP_NUM_THREADS": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
}


# a child's network (ChildProcess.net): None, the job's namespace holds a loopback that stays down and seccomp
# refuses every socket but AF_UNIX (DataLoader workers need those); LOOPBACK, one process with its loopback up and
# its TCP sockets allowed there (a one-process gloo group); RANKS, the same for a job of several ranks, whose machine
# keepers are forked too (nodes.py). No learner code may run in the process that holds the keepers' sockets, so a
# one-process job never has keepers: its learner code runs in that process.
LOOPBACK, RANKS = "loopback", "ranks"


@dataclass
class Context:
    """What the fork server prepared once for every child."""

    isolate: bool  # namespaces + read-only root + uid drop (False only in unsafe development mode)
    userns: bool  # no root: a user namespace gives the job its namespaces; its root is our own uid
    plan: isolation.RootPlan
    staging: str
    uid_base: int
    seccomp: object | None  # a pyseccomp filter, or None where unavailable
    seccomp_every_thread: object | None  # the same filter loaded into every thread (TSYNC): warm-first children
    seccomp_net: object | None  # the variant for jobs with their own loopback (several ranks, or asked) ...
    seccomp_net_every_thread: object | None  # ... and its TSYNC form
    gpu_plan: isolation.RootPlan | None  # plan + the GPU driver's libraries, for GPU slots' children
    harness: object  # the imported app.harness module
    pids_cgroup: bool  # when True the pids cgroup is the process limit and RLIMIT_NPROC only a backstop
    parent_pidfd: int | None = None  # the zygote's pidfd, readable once it exited: its children's parent (zygote.py)
    warm_ahead: bool = False  # per request: a child the pool keeps waiting warms its pages first (spawn)
    sources: tuple[str, ...] = ()  # the app package's module files, which the job's root hides (startup.py)


@dataclass
class ChildProcess:
    """The server's view of one forked child (pid None until the zygote has answered: zygote.py)."""

    pid: int | None
    slot: int
    limits: object
    cgroup: object | None
    stdout: int
    stderr: int
    report: int
    payload: int | None
    status: int
    warm: warmmod.Warm | None = None  # set for the spawn-then-isolate pool's children
    ahead: dict | None = None  # the host whose session it built ahead (a SimulatedHost payload): jobs that fit only
    spare: bool = False  # with ahead: it also forked a spare for a graded job's copy (harness/elsewhere.py)
    net: str | None = None  # LOOPBACK or RANKS: a job with its own loopback (jobqueue.network_of)
    pids_seen: set[int] = field(default_factory=set)  # the job's pids, for the GPU slot's release check
    setup_out: bytearray = field(default_factory=bytearray)  # what it printed before it was given a job
    kill_asked: bool = False  # killed before the zygote said its pid: killed when the pid comes


def spawn(zygote, limits, slot: int, cgroup, warm: warmmod.Warm | None = None, net: str | None = None,
          isolate: bool = True, userns: bool = False, ahead: dict | None = None, spare: bool = False,
          warm_ahead: bool = False) -> ChildProcess:
    """Have the zygote fork a child that isolates itself (warm: warms up first) and waits for its payload; return
    its pipes, without waiting for the fork (its pid comes later: zygote.py). The pipes are made here, in the
    server, and only their child ends travel to the zygote, so a job can be handed over before its child exists.

    net: LOOPBACK or RANKS, the child is made for a job with its own loopback (see _isolate). ahead: a host
    (SimulatedHost payload) whose session the child builds once isolated, before its job comes (app/harness/
    session.py ahead); it may then only be given a job that fits it. spare: with ahead, it also forks the process
    that runs a graded job's first copy elsewhere (app/harness/elsewhere.py fork_spare). warm_ahead: a child the pool
    keeps waiting for a job it does not know yet first warms its pages (startup.warm_pages), and with ahead the
    simulation's too (app/harness prepare_ahead); PreforkPool.refill says when not. A child made for a job never
    does: its job would wait for the warm-up."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    rep_r, rep_w = os.pipe()
    pay_r, pay_w = os.pipe()
    st_r, st_w = os.pipe()
    fcntl.fcntl(pay_w, fcntl.F_SETPIPE_SZ, PAYLOAD_PIPE_BYTES)
    request = {"limits": limits.to_dict(), "slot": slot, "net": net, "isolate": isolate, "userns": userns,
               "cgroup": cgroup.to_dict() if cgroup is not None else None,
               "warm": warm.to_dict() if warm is not None else None, "ahead": ahead,
               "spare": bool(spare and ahead), "warm_ahead": bool(warm_ahead)}
    try:
        zygote.request_child(request, [out_w, err_w, pay_r, rep_w, st_w])
    except BaseException:
        for fd in (out_r, err_r, rep_r, pay_w, st_r):
            os.close(fd)
        raise
    finally:
        for fd in (out_w, err_w, rep_w, pay_r, st_w):
            os.close(fd)
    for fd in (out_r, err_r, rep_r, st_r):
        os.set_blocking(fd, False)
    return ChildProcess(None, slot, limits, cgroup, out_r, err_r, rep_r, pay_w, st_r, warm, ahead,
                        spare=bool(spare and ahead), net=net)


def start_child(ctx: Context, request: dict, fds: list[int], limits_type) -> None:
    """In the zygote's child: rebuild the request's objects and become the job process (or the outer child).
    Never returns."""
    from app.sandbox.cgroups import JobCgroup

    try:
        cgroup = JobCgroup.from_dict(request["cgroup"]) if request.get("cgroup") else None
        warm = warmmod.Warm.from_dict(request["warm"]) if request.get("warm") else None
        limits, slot, net = limits_type.from_dict(request["limits"]), int(request["slot"]), request["net"]
        ctx.isolate, ctx.userns = bool(request["isolate"]), bool(request["userns"])
        ctx.warm_ahead = bool(request.get("warm_ahead", False))
    except BaseException as exc:  # noqa: BLE001 - never back into the zygote's loop
        _setup_failed(exc)
    _zygote_child(ctx, limits, slot, cgroup, fds, warm, net, request.get("ahead"), bool(request.get("spare")))


def new_pid_namespace(request: dict) -> bool:
    """Say whether the zygote forks this request's child into a fresh pid namespace: as root, with isolation.

    In user-namespace mode the outer child makes the pid namespace under its user namespace; in unsafe mode there
    is none."""
    return bool(request["isolate"]) and not request["userns"]


def _arrange_fds(fds: list[int]) -> None:
    """Place stdin (at EOF), then fds at 1..5; close everything else inherited from the server."""
    stdin_r, stdin_w = os.pipe()
    os.close(stdin_w)
    src = [stdin_r, *fds]
    floor = max(src) + 1
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, floor) for fd in src]
    for target, fd in enumerate(high):
        os.dup2(fd, target)
    os.closerange(len(high), resource.getrlimit(resource.RLIMIT_NOFILE)[0])


def _zygote_child(ctx: Context, limits, slot: int, cgroup, fds: list[int], warm, net: str | None,
                  ahead: dict | None = None, spare: bool = False) -> None:
    """Run in the zygote's forked child: join cgroups, unshare, and become the job process. Never returns.

    Namespaces are unshared here, while the process has one thread, also for a warm-first child: its warm-up
    starts threads (CUDA, OpenMP), and unshare changes only the calling thread's namespaces (CLONE_NEWUSER refuses
    a process with threads). As root the pid namespace is already the job's own (the zygote made it); with a
    user namespace this outer child forks the job process into the new one and mirrors its fate."""
    try:
        isolation.prctl(isolation.PR_SET_PDEATHSIG, signal.SIGKILL)
        if _parent_gone(ctx):  # the zygote died before the line above took effect
            os._exit(SETUP_FAILED)
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _arrange_fds(fds)  # also closes the zygote's own descriptors (its pid namespace, its pidfd)
        if cgroup is not None:
            cgroup.join()
        if not ctx.isolate:
            os.setsid()  # unsafe mode: the server kills the job by process group
            _job_process(ctx, limits, slot, warm, net, ahead, spare)
        if not ctx.userns:
            if os.getpid() != 1:  # the zygote's unshare(CLONE_NEWPID) did not take: never run a job without it
                raise RuntimeError("the job process is not pid 1 of its own pid namespace")
            # after joining: the cgroup namespace's root is the job's own group
            isolation.unshare(isolation.JOB_NAMESPACES & ~isolation.CLONE_NEWPID)
            _job_process(ctx, limits, slot, warm, net, ahead, spare)
        _enter_user_namespace()
        pid = os.fork()
        if pid == 0:
            _job_process(ctx, limits, slot, warm, net, ahead, spare)
        os.closerange(0, 6)
        _mirror_exit(pid)
    except BaseException as exc:  # noqa: BLE001 - report any setup failure on stderr, then exit
        _setup_failed(exc)


def _parent_gone(ctx: Context) -> bool:
    """Say whether the zygote has exited. Its pid cannot tell: pid 1 of a pid namespace reads its parent as 0."""
    if ctx.parent_pidfd is None:
        return False
    return bool(select.select([ctx.parent_pidfd], [], [], 0)[0])


def _enter_user_namespace() -> None:
    """Unshare every namespace under a new user namespace whose root is the server's own (unprivileged) uid.

    A process may only map its own uid. The job then drops every capability; the user namespace only serves to
    let it build its own mount, pid and network namespaces without root.
    """
    if os.getuid() == 0:
        os.setgroups([])  # a root server here is a test of this mode: keep the host's root group out
    uid, gid = os.getuid(), os.getgid()  # read before unsharing: inside, unmapped ids read as 65534
    isolation.unshare(isolation.CLONE_NEWUSER | isolation.JOB_NAMESPACES)
    isolation.map_root(uid, gid)


def _mirror_exit(pid: int) -> None:
    """Wait for the job process and end the same way: same exit code, or killed by the same signal."""
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if -code not in (signal.SIGKILL, signal.SIGSTOP):  # those two cannot be caught, blocked or reset
            signal.signal(-code, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [-code])
        os.kill(os.getpid(), -code)
        code = 128 - code
    os._exit(code & 0xFF)


def _setup_failed(exc: BaseException) -> None:
    try:
        where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
        at = f" (at {where.name}: {where.line})" if where else ""
        os.write(2, f"sandbox setup failed: {type(exc).__name__}: {exc}{at}\n".encode())
    finally:
        os._exit(SETUP_FAILED)


def _isolate(ctx: Context, limits, slot: int, warm: warmmod.Warm | None = None,
             net: str | None = None) -> tuple[int | None, dict]:
    """Turn this process into the job's sandbox: root, hostname, rlimits, uid, seccomp. Order matters.

    warm: this process already warmed up (and may have threads); see app.sandbox.warm. net: LOOPBACK (one process
    that asked) or RANKS (a job of several ranks): its network namespace's loopback comes up (before privileges
    go), /etc/hosts names it, the seccomp variant lets its processes open TCP sockets and bind, connect, listen and
    accept (that loopback is all the namespace holds); with RANKS the machine keepers of a job of several machines
    are forked (nodes.py). Returns (None, {machine: socket}) in the job process, and
    (g, {g: socket}) in machine keeper g, which has isolated itself the same way."""
    machine, machines = None, {}
    if ctx.isolate:
        os.setsid()
        plan = ctx.gpu_plan if warm and warm.gpu else ctx.plan
        isolation.build_root(plan, ctx.staging, limits.tmpfs_bytes, warm.devices() if warm else (),
                             hosts=isolation.RANKS_HOSTS if net else None)
        if warm:
            isolation.close_directory_fds(STATUS_FD + 1)
        socket.sethostname("sandbox")
        if net:
            isolation.bring_up_loopback()
        if net == RANKS:
            machine, machines = nodes.fork_keepers(limits.tmpfs_bytes, plan)
    nproc = None
    if ctx.isolate:
        # RLIMIT_NPROC counts the processes of the job's uid (in a user namespace: of that namespace only);
        # with a pids cgroup it is a backstop until the cgroup refuses a fork (server.refuse_forks_early)
        nproc = limits.pids * 4 if ctx.pids_cgroup else limits.pids
    isolation.apply_rlimits(limits, isolation.address_space_bytes(limits.memory_bytes, limits.pids), nproc,
                            cpu_used_s=warmmod.cpu_seconds_used() if warm else 0.0)
    # below the web server in the scheduler, also where there are no cgroups: pages stay quick under hostile jobs
    if warm:
        isolation.nice_every_thread(JOB_NICE)
    else:
        os.setpriority(os.PRIO_PROCESS, 0, JOB_NICE)
    if ctx.userns and warm:
        warmmod.check_threads_for_userns()
    if ctx.userns:
        isolation.drop_privileges(0, groups=False)  # root of the user namespace = an unprivileged host uid
        isolation.drop_capabilities()
    elif os.getuid() == 0 and ctx.isolate:
        isolation.drop_privileges(ctx.uid_base + slot)
    isolation.prctl(isolation.PR_SET_PDEATHSIG, signal.SIGKILL)  # credentials changed: set it again
    os.chdir("/tmp")
    os.environ.clear()
    os.environ.update(CLEAN_ENV)
    if warm:
        os.environ.update(warm.env())
    if net:
        seccomp = ctx.seccomp_net_every_thread if warm else ctx.seccomp_net
    else:
        seccomp = ctx.seccomp_every_thread if warm else ctx.seccomp
    if seccomp is not None:
        seccomp.load()  # also sets no_new_privs (in every thread, with TSYNC)
    return machine, machines


def _read_payload(channel) -> dict:
    return json.loads(channel.read_payload(PAYLOAD_FD))


def _job_process(ctx: Context, limits, slot: int, warm, net: str | None, ahead: dict | None = None,
                 spare: bool = False) -> None:
    """(Warm up,) isolate, (build the session ahead,) signal readiness, wait for the payload and run the harness.
    Never returns.

    ahead: the host whose simulated session the harness builds now, isolated (the job's environment, root, uid
    and seccomp filter), before the payload comes; the job's wall clock starts at hand-over, after it. spare: it
    also forks the spare that runs a graded job's first copy (app/harness/elsewhere.py), before warming its pages."""
    try:
        if ctx.isolate:  # its working directory will be the job's own temp dir (the machine keepers' too)
            ctx.harness.in_own_folder()
        if warm:
            if ctx.isolate and warm.gpu is not None and warm.dev_root == warmmod.HOST_DEV:
                isolation.own_proc()  # CUDA's cuInit fails in a pid namespace that /proc does not show
            warmmod.warm_up(warm)
        machine, machines = _isolate(ctx, limits, slot, warm, net)
        if ctx.isolate:
            startup.forget_hidden_sources(ctx.sources)
        if machine is not None:  # a machine keeper: it serves the launcher, never runs the job
            nodes.serve(machines[machine], ctx.harness.start_rank, (PAYLOAD_FD, REPORT_FD, STATUS_FD))
        ctx.harness.interpreter_ahead()  # what a new interpreter has that needs no job: not on the job's time
        if ahead:
            ctx.harness.prepare_ahead(ahead, warm=startup.warm_pages if ctx.warm_ahead else None, spare=spare)
        elif ctx.warm_ahead:  # the pool's plain child (jobs on other machines, the plain CPU): its pages too
            startup.warm_pages()
        os.write(REPORT_FD, READY)
    except BaseException as exc:  # noqa: BLE001 - any failure to isolate is reported, and the job never runs
        _setup_failed(exc)
    code, out, err = 1, None, None
    channel = ctx.harness.channel
    try:
        payload = _read_payload(channel)
        if warm and payload.get("sandbox_limits"):  # this child was made before its job was known
            tight = payload.pop("sandbox_limits")
            warmmod.tighten_rlimits(type(limits).from_dict(tight))
            nodes.tighten(machines, tight)
        sys.dont_write_bytecode = True
        sys.stdin = sys.__stdin__ = open(0, "r", encoding="utf-8", closefd=False)
        text = {"buffering": 1, "encoding": "utf-8", "errors": "backslashreplace", "closefd": False}
        out = sys.stdout = sys.__stdout__ = open(1, "w", **text)  # line-buffered: output streams as printed
        err = sys.stderr = sys.__stderr__ = open(2, "w", **text)
        code = ctx.harness.main(payload, REPORT_FD, request_key=channel.request_key,
                                machines={g: sock.fileno() for g, sock in machines.items()})
    except BaseException:  # noqa: BLE001 - the harness itself broke: show it like Python would
        traceback.print_exc(file=err)
    finally:
        # the streams made above, not sys.stdout: the learner's code may have replaced those with anything
        for stream in (out, err):
            try:
                stream.flush()
            except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
                pass
    code = code if isinstance(code, int) and 0 <= code <= 255 else 1
    try:
        os.write(STATUS_FD, f"\n{code}\n".encode())
    except OSError:
        pass
    os._exit(code)
