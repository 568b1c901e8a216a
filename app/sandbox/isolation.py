"""The isolation steps a job's process takes, and the host probe behind `course doctor`.

Everything here is called either by the fork server at start-up (planning, building the seccomp filter) or in a
freshly forked child before it runs learner code. The child runs as root until `drop_privileges`, so the order in
`app.sandbox.child` matters; each step here is one concern.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import resource
import site
import socket
import stat
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path

libc = ctypes.CDLL(None, use_errno=True)

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_NEWTIME = 0x00000080
JOB_NAMESPACES = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWPID | CLONE_NEWNET

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x20, 0x1000, 0x4000, 1 << 18
MNT_DETACH = 2
SYS_PIVOT_ROOT = 155  # x86_64
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36

# The devices a Python program expects; each is bind-mounted from the host onto an empty file.
DEVICES = ("null", "zero", "full", "random", "urandom")
# Files from /etc the dynamic loader and time functions read.
ETC_FILES = ("/etc/ld.so.cache", "/etc/localtime")
# bytes; the private /dev tmpfs only holds the device files' mount points
DEV_TMPFS_BYTES = 64 << 10
# bytes; per-thread stack reservation the address-space limit leaves room for (glibc's default with an 8 MiB stack)
THREAD_STACK_BYTES = 8 << 20
# open files per process; more than a training script needs, few enough to notice a leak
NOFILE = 256
# /etc/hosts of a job of several ranks, whose network namespace holds its own loopback and nothing else. gloo
# binds to the address its host name resolves to, and c10d names each peer with getnameinfo(); a peer that
# reached an IPv6 socket over IPv4 shows as ::ffff:127.0.0.1, which needs its own line (else c10d warns on every
# connection, after a DNS lookup that cannot succeed here).
# node0..node3: the simulated machines of a job of several machines (harness/rank.py), all on the job's loopback
RANKS_HOSTS = ("127.0.0.1 sandbox localhost node0 node1 node2 node3\n::1 localhost ip6-localhost\n"
               "::ffff:127.0.0.1 localhost sandbox\n")
SIOCGIFFLAGS, SIOCSIFFLAGS = 0x8913, 0x8914
IFF_UP, IFF_LOOPBACK, IFF_RUNNING = 0x1, 0x8, 0x40


def _check(rc: int, what: str) -> None:
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


def unshare(flags: int) -> None:
    """Move the calling process into new namespaces (Python 3.11 has no os.unshare)."""
    _check(libc.unshare(flags), "unshare")


def setns(fd: int, nstype: int) -> None:
    """Move the calling process into the namespace fd refers to (Python 3.11 has no os.setns)."""
    _check(libc.setns(fd, nstype), "setns")


def mount(src: str | None, dst: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    """Call mount(2)."""
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(libc.mount(enc(src), enc(dst), enc(fstype), flags, enc(data)), f"mount {dst}")


def prctl(option: int, arg: int) -> None:
    """Call prctl(2) with one argument."""
    _check(libc.prctl(option, arg, 0, 0, 0), f"prctl {option}")


# ------------------------------------------------------------------------------------------------ the root
@dataclass
class RootPlan:
    """What the job's read-only root contains: directories bound from the host at the same path, files, links, and
    directories inside those that the job sees empty (`hidden`)."""

    dirs: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    links: dict[str, str] = field(default_factory=dict)
    hidden: list[str] = field(default_factory=list)


def _covered(path: str, dirs: list[str]) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in dirs)


def plan_root() -> RootPlan:
    """Decide what the job's root holds: /usr, the Python installation, the venv, and every mapped library's dir.

    Called in the fork server after torch is imported, so /proc/self/maps names every shared library in use.
    Nothing else of the host is visible: no project files, no database, no home directories.
    """
    plan = RootPlan()
    wanted = ["/usr", os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix)]
    for line in Path("/proc/self/maps").read_text().splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and parts[5].startswith("/") and not parts[5].endswith("(deleted)"):
            wanted.append(os.path.dirname(os.path.realpath(parts[5])))
    for d in sorted(set(wanted), key=len):
        if os.path.isdir(d) and not _covered(d, plan.dirs) and not d.startswith(("/proc", "/dev", "/sys")):
            plan.dirs.append(d)
    for name in ("/lib", "/lib64", "/lib32", "/bin", "/sbin"):
        if os.path.islink(name):
            plan.links[name] = os.readlink(name)
        elif os.path.isdir(name) and not _covered(name, plan.dirs):
            plan.dirs.append(name)
    plan.files = [f for f in ETC_FILES if os.path.isfile(f)]
    plan.hidden = base_site_packages(plan.dirs, needed=wanted)
    return plan


def base_site_packages(dirs: list[str], needed: list[str]) -> list[str]:
    """Return the base interpreter's site-packages folders that the root would show: the job needs the base's
    standard library, not the host's unrelated packages (the venv has its own). A folder holding something
    `needed` (the venv, a library the server has mapped) stays visible."""
    hidden = []
    for path in site.getsitepackages([sys.base_prefix]):
        real = os.path.realpath(path)
        if os.path.isdir(real) and _covered(real, dirs) and not any(_covered(d, [real]) for d in needed):
            hidden.append(real)
    return sorted(set(hidden))


def own_proc() -> None:
    """Show the job's own pid namespace in /proc now, before build_root (which mounts one in the new root).

    A warm GPU child makes its CUDA context before it isolates, but already inside the job's pid namespace; the
    CUDA driver then fails cuInit with "Error 304: OS call failed or operation not supported on this OS" while
    /proc is still the host's (seen on an H200, driver 580.159.04, torch 2.11.0+cu130, 2026-12-04; a fresh proc
    mount made it succeed). The mount stays inside the job's mount namespace: / is made private first."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)


def _bind_ro(src: str, dst: str) -> None:
    mount(src, dst, None, MS_BIND | MS_REC)
    mount(None, dst, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def hold_binds(paths: list[str], staging: str) -> list[tuple[str, str]]:
    """Bind each of paths (read-only) into a small tmpfs at staging, so that a mount over their parent can be
    undone for them by restore_binds. Returns [(path, its place under staging)]."""
    os.makedirs(staging, exist_ok=True)
    _tmpfs(staging, 1 << 20, mode="0700")
    held = []
    for i, path in enumerate(paths):
        place = f"{staging}/{i}"
        if os.path.isdir(path):
            os.makedirs(place)
        else:
            _touch(place)
        _bind_ro(path, place)
        held.append((path, place))
    return held


def restore_binds(held: list[tuple[str, str]], staging: str) -> None:
    """Bind what hold_binds kept back at its own path (read-only), then drop the staging tmpfs."""
    for path, place in held:
        if os.path.isdir(place):
            os.makedirs(path, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            _touch(path)
        _bind_ro(place, path)
    _check(libc.umount2(staging.encode(), MNT_DETACH), f"umount {staging}")
    os.rmdir(staging)


def _tmpfs(dst: str, size: int, mode: str = "1777", extra: int = 0) -> None:
    mount("tmpfs", dst, "tmpfs", MS_NOSUID | MS_NODEV | extra, f"size={size},mode={mode}")


def _touch(path: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))


def with_files(plan: RootPlan, paths: list[str]) -> RootPlan:
    """Return plan plus these host files (e.g. the GPU driver's libraries), bound read-only at the same paths.

    A file under a directory the root already shows is skipped; a symbolic link is recreated and its target bound.
    """
    files, links = list(plan.files), dict(plan.links)
    for path in paths:
        # /lib/libcuda.so where /lib is a link to usr/lib: the bound /usr already shows it (a second link fails)
        seen_at = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
        if _covered(path, plan.dirs) or _covered(seen_at, plan.dirs):
            continue
        if os.path.islink(path):
            links[path] = os.readlink(path)
        real = os.path.realpath(path)
        if os.path.isfile(real) and not _covered(real, plan.dirs) and real not in files:
            files.append(real)
    return RootPlan(dirs=list(plan.dirs), files=files, links=links, hidden=list(plan.hidden))


def build_root(plan: RootPlan, staging: str, tmpfs_bytes: int, devices: list[tuple[str, str]] = (),
               hosts: str | None = None) -> None:
    """Replace the mount tree with a minimal read-only root; needs a new mount and pid namespace, as root.

    devices: extra (host path, name under /dev) device nodes to bind, e.g. a GPU's; the devices cgroup decides
    which of them may be opened. hosts: the text of /etc/hosts (jobs of several ranks), written into the root."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing we mount may propagate back to the host
    _tmpfs(staging, 1 << 20, mode="0755")
    new = staging.rstrip("/")
    for d in ("/tmp", "/var/tmp", "/dev", "/proc", "/.old"):
        os.makedirs(new + d, exist_ok=True)
    # The private tmpfs go in first: a venv that lives under /tmp (a checkout in /tmp) is then bound on top of
    # it, read-only, instead of being hidden by it.
    _tmpfs(new + "/tmp", tmpfs_bytes)
    _tmpfs(new + "/var/tmp", tmpfs_bytes)
    for d in plan.dirs:
        os.makedirs(new + d, exist_ok=True)
        _bind_ro(d, new + d)
    for f in plan.files:
        _touch(new + f)
        _bind_ro(f, new + f)
    for d in plan.hidden:  # an empty, read-only tmpfs over it
        mount("tmpfs", new + d, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0755")
    for link, target in plan.links.items():
        os.makedirs(os.path.dirname(new + link), exist_ok=True)
        os.symlink(target, new + link)
    if hosts is not None:
        os.makedirs(new + "/etc", exist_ok=True)
        with open(new + "/etc/hosts", "w") as f:
            f.write(hosts)
    _tmpfs(new + "/dev", DEV_TMPFS_BYTES, mode="0755", extra=MS_NOEXEC)
    for dev in DEVICES:
        _touch(f"{new}/dev/{dev}")
        mount(f"/dev/{dev}", f"{new}/dev/{dev}", None, MS_BIND)
    for src, name in devices:
        _touch(f"{new}/dev/{name}")
        mount(src, f"{new}/dev/{name}", None, MS_BIND)
    os.mkdir(new + "/dev/shm")
    _tmpfs(new + "/dev/shm", tmpfs_bytes, extra=MS_NOEXEC)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{new}/dev/{name}")
    mount("proc", new + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)  # shows only the job's own pids
    _check(libc.syscall(SYS_PIVOT_ROOT, new.encode(), (new + "/.old").encode()), "pivot_root")
    os.chdir("/")
    _check(libc.umount2(b"/.old", MNT_DETACH), "umount old root")
    os.rmdir("/.old")
    mount(None, "/", None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def bring_up_loopback() -> None:
    """Bring up `lo` of the job's own network namespace (a new namespace has it down, and nothing else).

    Needs CAP_NET_ADMIN in the namespace: call before dropping privileges. Only jobs of several ranks do; their
    ranks talk over this loopback, which no other namespace can reach."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack_from("16sH", fcntl.ioctl(s, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP | IFF_RUNNING))


# ------------------------------------------------------------------------------------------------ limits, uid
def address_space_bytes(memory_bytes: int, pids: int) -> int:
    """Return the RLIMIT_AS for a job: what the server already maps, plus the memory limit, plus thread stacks."""
    vm_kib = 0
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            vm_kib = int(line.split()[1])
    return vm_kib * 1024 + memory_bytes + pids * THREAD_STACK_BYTES


def apply_rlimits(limits, address_space: int, nproc: int | None, cpu_used_s: float = 0.0) -> None:
    """Set the job's rlimits; call before dropping privileges (a non-root process cannot raise them back).

    cpu_used_s: CPU seconds this process already spent warming up, which are not the job's."""
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    # the soft limit sends SIGXCPU, the hard one SIGKILL a second later
    cpu = limits.cpu_s + (int(cpu_used_s) + 1 if cpu_used_s else 0)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.tmpfs_bytes, limits.tmpfs_bytes))
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if nproc is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


def refuse_forks_early(pids: list[int], nproc: int, uid: int) -> None:
    """Set RLIMIT_NPROC of these running processes of one job, all of uid `uid`, to nproc (soft and hard).

    Lowering another process's limit takes either CAP_SYS_RESOURCE, which the hosts of this project do not grant
    even to root (CapEff lacks bit 24), or the same uid and gid as the process (Linux's check_prlimit_permission): so
    a short-lived child of the server becomes the job's uid, lowers each limit and exits. A process that has exited
    meanwhile is skipped."""
    child = os.fork()
    if child == 0:
        status = 0
        try:
            drop_privileges(uid)
            for pid in pids:
                try:
                    resource.prlimit(pid, resource.RLIMIT_NPROC, (nproc, nproc))
                except (ProcessLookupError, PermissionError):
                    pass  # gone, or no longer the job's (a pid reused in between)
        except BaseException:  # noqa: BLE001 - a forked child never returns into the server's loop
            status = 1
        os._exit(status)
    os.waitpid(child, 0)


def nice_every_thread(nice: int) -> None:
    """Lower the priority of every thread (setpriority on Linux changes one thread; warm-up may have started more)."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.setpriority(os.PRIO_PROCESS, int(tid), nice)
        except ProcessLookupError:  # a thread that just ended
            pass


def close_directory_fds(first: int) -> int:
    """Close every open directory from fd `first` on; return how many. Call right after pivot_root.

    A directory opened before the root was replaced still points into the host's tree: openat(fd, "..") would
    walk out of the sandbox. Nothing a job needs keeps one open (CUDA keeps device nodes, not directories)."""
    closed = 0
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if fd >= first and stat.S_ISDIR(os.fstat(fd).st_mode):
                os.close(fd)
                closed += 1
        except OSError:  # the listing's own fd, already closed
            pass
    return closed


def map_root(uid: int, gid: int) -> None:
    """After unshare(CLONE_NEWUSER): make uid/gid 0 of the new user namespace the given host uid/gid."""
    for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
        try:
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
        except OSError as exc:
            raise OSError(exc.errno, f"writing {text!r} to /proc/self/{name}: {exc.strerror}") from None


PR_CAPBSET_DROP = 24
SYS_CAPSET = 126  # x86_64
CAP_LAST = 63


def drop_capabilities() -> None:
    """Empty the bounding, effective, permitted and inheritable capability sets (user-namespace mode)."""
    for cap in range(CAP_LAST + 1):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == errno.EINVAL:
            break  # past the last capability this kernel knows
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # two empty {effective, permitted, inheritable} sets
    _check(libc.syscall(SYS_CAPSET, header, data), "capset")


def drop_privileges(uid: int, groups: bool = True) -> None:
    """Become the unprivileged uid (and gid) for good; this also clears every capability."""
    if groups:
        os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


# ------------------------------------------------------------------------------------------------ seccomp
# connect, bind, listen and accept are not denied: socket() is, for every address family but AF_UNIX (a job of
# several ranks, or one with its own loopback: also those of its loopback), so they reach only Unix sockets, and a
# job's Unix sockets reach only the job: abstract names belong to its own network namespace, and a socket file
# lies in its own temp dirs (its root binds no host folder that holds one: tests/security/test_hostile.py). A
# DataLoader's workers need them: each hands its batch's shared memory back over an AF_UNIX socket it binds
# (multiprocessing's resource_sharer), and where bind() was refused the loader waited for the batch until the
# wall limit.
DENIED_SYSCALLS = (
    # looking into or changing other processes, the kernel, or namespaces
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "personality",
    "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen",
    "fsmount", "fsconfig", "fspick", "mount_setattr", "open_by_handle_at", "name_to_handle_at",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot",
    "swapon", "swapoff", "acct", "quotactl", "syslog", "settimeofday", "clock_settime", "clock_adjtime",
    "adjtimex", "sethostname", "setdomainname", "vhangup", "lookup_dcookie", "fanotify_init",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
)


# the address families a job of several ranks may open sockets of: gloo and c10d's store use TCP over lo, and
# gloo reads the interface list (getifaddrs), which takes a NETLINK_ROUTE socket; in the job's own network
# namespace that lists its loopback alone, and changing anything there needs a capability the job does not have
RANKS_FAMILIES = (socket.AF_UNIX, socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK)
NETLINK_ROUTE = 0


def seccomp_filter(every_thread: bool = False, network: bool = False):
    """Build the job's seccomp filter (libseccomp through pyseccomp); load() it as the last isolation step.

    every_thread: load it into every thread of the process at once (TSYNC), for a child that warmed up (CUDA,
    OpenMP) before isolating and so already has threads; without it a filter covers the loading thread only.
    network: the variant for a job of several ranks (or one with its own loopback): AF_INET/AF_INET6 sockets are
    allowed too (their network namespace holds only its own loopback); every other rule is the same.
    ioctl and mmap stay allowed on every fd: CUDA needs them on its GPU's nodes."""
    import pyseccomp as sc

    deny = sc.ERRNO(errno.EPERM)
    f = sc.SyscallFilter(defaction=sc.ALLOW)
    if every_thread:
        f.set_attr(sc.Attr.CTL_TSYNC, 1)
    if network:
        _deny_families_but(f, deny, RANKS_FAMILIES)
    else:
        f.add_rule(deny, "socket", sc.Arg(0, sc.NE, socket.AF_UNIX))
    f.add_rule(deny, "socketpair", sc.Arg(0, sc.NE, socket.AF_UNIX))
    for name in DENIED_SYSCALLS:
        try:
            f.add_rule(deny, name)
        except (OSError, RuntimeError, ValueError):  # a syscall this libseccomp does not know: nothing to deny
            pass
    # clone3 passes its flags in memory seccomp cannot read: answer ENOSYS so glibc falls back to clone(),
    # whose flags we can check; no new namespaces (a user namespace would give back capabilities)
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    for flag in (CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID,
                 CLONE_NEWNET, CLONE_NEWTIME):
        f.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    return f


def _deny_families_but(f, deny, allowed: tuple[int, ...]) -> None:
    """Refuse socket() for every address family but `allowed` (netlink: routing only). libseccomp takes one
    comparison per argument and rule, so the gaps between the allowed families are refused one by one, and
    everything above the last one (a family number with high bits set, as a raw syscall may pass, is above it)."""
    import pyseccomp as sc

    for family in range(max(allowed)):
        if family not in allowed:
            f.add_rule(deny, "socket", sc.Arg(0, sc.EQ, family))
    f.add_rule(deny, "socket", sc.Arg(0, sc.GT, max(allowed)))
    if socket.AF_NETLINK in allowed:  # the routing protocol only (no audit, uevents, sock_diag, netfilter ...)
        f.add_rule(deny, "socket", sc.Arg(0, sc.EQ, socket.AF_NETLINK), sc.Arg(2, sc.NE, NETLINK_ROUTE))


# ------------------------------------------------------------------------------------------------ host probe
def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def userns_available() -> bool:
    """Return whether unprivileged user namespaces are enabled on this host."""
    if _read("/proc/sys/kernel/unprivileged_userns_clone") == "0":
        return False
    return (_read("/proc/sys/user/max_user_namespaces") or "0") != "0"


def seccomp_available() -> tuple[bool, str]:
    """Return whether a seccomp filter can be built here, and why not."""
    try:
        seccomp_filter()
    except Exception as exc:  # noqa: BLE001 - any failure means "not available", reported by doctor
        return False, f"{type(exc).__name__}: {exc}"
    return True, ""
