"""Per-job cgroups: memory, pids and CPU limits, the devices a job may open, CPU and OOM accounting, the kill sweep.

cgroup v1 is what this project's hosts have (v2 has no delegated controllers there); v2 is used when our own
cgroup delegates memory, pids and cpu. Every server makes its own parent group named after its pid and a random
token, so several servers (several test sessions) on one machine never touch each other's jobs.

CPU: each job's group has one core per copy of the learner's program it runs at once (cpu.max; JobCgroup.set_cores),
and the parent group of all jobs has the server's cores less a reserve (COURSE_SANDBOX_CPU_RESERVE), so however
many jobs burn CPU, the web server beside the sandbox keeps that much of a core to answer pages. Where
COURSE_SANDBOX_JOBS_IDLE asks for it (the default), that parent group is also an idle group (cpu.idle): a page request
that wakes up takes a core from a job at once instead of waiting out the job's time slice. An idle group starves while
the rest of the host wants every core, so a guard (CgroupManager.feed_jobs) makes it a normal group for a while
whenever jobs that wanted a core got almost none.
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from pathlib import Path

V1_CONTROLLERS = ("memory", "pids", "cpu", "cpuacct", "devices")
# microseconds; the CFS accounting period, the kernel's default
CFS_PERIOD_US = 100_000
# Relative CPU weight of a job against the web server (v1 cpu.shares; the default is 1024): when both want the
# cores, pages keep answering and learners' programs wait. v2's cpu.weight scale has its default at 100.
JOB_CPU_SHARES = 128
JOB_CPU_WEIGHT = 12
# microseconds; the smallest quota the kernel accepts (a reserve of every core still leaves jobs this much)
MIN_QUOTA_US = 1_000
# The idle group's starvation guard (CgroupManager.feed_jobs). Jobs "starved" when, over two looks in a row of at least
# GUARD_WINDOW_S each, all of them together got under STARVED_CORES of CPU, and in the second their threads waited for
# a core (run queue time, /proc/TID/schedstat) for at least STARVED_WAIT of it, summed: an idle group beside two busy
# loops got 0.001-0.09 of a core (weight 3 against 1024 each, kernel/sched/sched.h WEIGHT_IDLEPRIO), and jobs beside
# pages alone get 1-1.5 cores (bench/README, "Jobs in an idle group"). The wait tells a starved job from one that
# sleeps or has just started. The group is then a normal one for NORMAL_HOLD_S.
STARVED_CORES = 0.25
STARVED_WAIT = 0.5
GUARD_WINDOW_S = 0.1
NORMAL_HOLD_S = 1.0
# seconds; a look longer than this (the server had no job to poll for) starts over instead of judging the gap
GUARD_STALE_S = 3 * GUARD_WINDOW_S


def _v1_mounts() -> dict[str, str]:
    """Map each v1 controller to its mount point, from /proc/self/mountinfo."""
    mounts: dict[str, str] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        parts = right.split()
        if len(parts) >= 3 and parts[0] == "cgroup":
            for opt in parts[2].split(","):
                if opt in V1_CONTROLLERS:
                    mounts[opt] = left.split()[4]
    return mounts


def _own_paths() -> dict[str, str]:
    """Map controller name (or '' for v2) to this process's cgroup path, from /proc/self/cgroup."""
    paths: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, ctrls, path = line.split(":", 2)
        for c in ctrls.split(",") if ctrls else [""]:
            paths[c] = path
    return paths


def _write(path: str, value: object) -> None:
    with open(path, "w") as f:
        f.write(str(value))


def _used_ns(version: str, dirs: dict[str, str]) -> int | None:
    """CPU time used by the processes of a group and its children, in ns (v2 cpu.stat, v1 cpuacct.usage)."""
    try:
        if version == "v2":
            for line in Path(f"{dirs['unified']}/cpu.stat").read_text().splitlines():
                if line.startswith("usage_usec"):
                    return int(line.split()[1]) * 1000
        elif "cpuacct" in dirs:
            return int(Path(f"{dirs['cpuacct']}/cpuacct.usage").read_text())
    except OSError:
        pass
    return None


def _cores_of(own_dir: str | None, version: str) -> float:
    """The cores this process's own group may use: the CPUs it may run on, or less where its group has a quota
    (a container's `--cpus`)."""
    cores = float(len(os.sched_getaffinity(0)))
    if own_dir is None:
        return cores
    try:
        if version == "v2":
            quota, period = Path(f"{own_dir}/cpu.max").read_text().split()[:2]
        else:
            quota = Path(f"{own_dir}/cpu.cfs_quota_us").read_text().strip()
            period = Path(f"{own_dir}/cpu.cfs_period_us").read_text().strip()
        if quota not in ("max", "-1"):
            cores = min(cores, int(quota) / int(period))
    except (OSError, ValueError):
        pass
    return cores


def _remove_stale(parent: str) -> None:
    """Remove empty groups left by servers that were killed (their pid, in the name, is gone)."""
    try:
        names = [n for n in os.listdir(parent) if n.startswith("course-sbx-")]
    except OSError:
        return
    for name in names:
        pid = name.split("-")[2]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            base = f"{parent}/{name}"
            for job in (d for d in os.listdir(base) if d.startswith("job-")):
                try:
                    os.rmdir(f"{base}/{job}")
                except OSError:
                    pass
            try:
                os.rmdir(base)
            except OSError:
                pass


class CgroupManager:
    """The server's own parent cgroups; makes one JobCgroup per job.

    cpu_reserve: cores (fractions too) kept from all jobs together for the processes beside the sandbox, the web
    server first: the parent group of the jobs gets cpu.max = (this group's cores - cpu_reserve); 0: no cap."""

    def __init__(self, cpu_reserve: float = 0.0, jobs_idle: bool = False) -> None:
        self.version = "none"
        self.bases: dict[str, str] = {}
        self.reason = ""
        self._token = f"course-sbx-{os.getpid()}-{secrets.token_hex(3)}"
        self._counter = 0
        self.cores = float(len(os.sched_getaffinity(0)))  # the cores this server's group may use
        self.jobs_quota_us: int | None = None  # the parent group's quota per CFS_PERIOD_US; None: no cap
        self.jobs_idle = False  # whether the parent group of the jobs is an idle group (cpu.idle = 1) when not starved
        self.idle_now = False  # cpu.idle as last written (feed_jobs turns it off for NORMAL_HOLD_S when jobs starve)
        self._look: tuple[float, int] | None = None  # (monotonic s, the jobs' CPU ns) at feed_jobs' last look
        self._waits: dict[str, int] | None = None  # the jobs' threads' run queue ns, read after a look that got little
        self._normal_until = 0.0
        try:
            self._setup_v1() or self._setup_v2()
        except OSError as exc:
            self.reason = f"cannot create cgroups: {exc}"
            self.version, self.bases = "none", {}
        if self.bases and cpu_reserve > 0:
            self._cap_jobs(cpu_reserve)
        if self.bases and jobs_idle:
            self._idle_jobs()

    @property
    def _cpu_base(self) -> str | None:
        """The parent group of the jobs where its CPU files are (v2's one tree, or v1's cpu controller)."""
        return self.bases.get("unified") or self.bases.get("cpu")

    def _cap_jobs(self, reserve: float) -> None:
        """Give the parent group of the jobs (this group's cores - reserve) cores at most, all jobs together.

        Each job's weight (JOB_CPU_SHARES) is against its siblings, the other jobs: their parent weighs as much as
        the web server, so four one-core jobs on two cores still took a core from it and page p99 doubled. A
        quota is a ceiling instead: what jobs cannot take stays the web server's (and idle otherwise: a reserve
        of half a core leaves 1.5 of 2 cores to jobs even when no page is asked for)."""
        base = self._cpu_base
        if base is None:
            return
        quota = max(MIN_QUOTA_US, int((self.cores - reserve) * CFS_PERIOD_US))
        try:
            if self.version == "v2":
                _write(f"{base}/cpu.max", f"{quota} {CFS_PERIOD_US}")
            else:
                _write(f"{base}/cpu.cfs_period_us", CFS_PERIOD_US)
                _write(f"{base}/cpu.cfs_quota_us", quota)
        except OSError as exc:
            self.reason += f"cpu reserve not applied: {exc.strerror}; "
            return
        self.jobs_quota_us = quota

    def _idle_jobs(self) -> None:
        """Make the parent group of the jobs an idle group (cpu.idle = 1, the same file in v1 and v2; Linux 5.15+).

        The cap above bounds how much CPU jobs take, not when: a web server that wakes up on the core a job is
        burning waited out the job's protected slice (EEVDF, ~1.4 ms here) before it ran, and a page read is several
        wake-ups, so one spinning job put page p99 at 2.4x the quiet p99. The scheduler preempts an idle group's
        task at once for any other task that wakes, and treats a core that runs only idle groups as free when it
        places one (sched_idle_cpu). A task-level SCHED_IDLE does neither: the comparison is made between the
        group entities, and the jobs' group is a normal one (bench/README, "Jobs in an idle group"). The price: when
        the rest of the host wants every core for long, an idle group gets almost nothing (its weight is 3 against
        a task's 1024): beside two busy loops, 9 of 12 runs of a 4-rank job that takes 1.1 s reached its 10 s limit.
        feed_jobs watches for that and makes the group a normal one while it lasts: with it, 5 of 5 such runs took
        1.25-2.34 s (1.1 s without the idle group)."""
        if self._set_idle(True):
            self.jobs_idle = True

    def _set_idle(self, on: bool) -> bool:
        """Write the parent group's cpu.idle (the one writer of it); return whether it took."""
        base = self._cpu_base
        if base is None:
            return False
        try:
            _write(f"{base}/cpu.idle", int(on))
        except OSError as exc:
            self.reason += f"jobs' cpu.idle not set to {int(on)}: {exc.strerror}; "
            return False
        self.idle_now = on
        return True

    def _jobs_waits(self) -> dict[str, int]:
        """Each job thread's time spent waiting for a core so far, ns (the second field of /proc/TID/schedstat)."""
        base = self._cpu_base
        waits: dict[str, int] = {}
        for tasks in Path(base).glob("job-*/cgroup.threads" if self.version == "v2" else "job-*/tasks"):
            try:
                tids = tasks.read_text().split()
            except OSError:
                continue
            for tid in tids:
                try:
                    waits[tid] = int(Path(f"/proc/{tid}/schedstat").read_text().split()[1])
                except (OSError, IndexError, ValueError):
                    continue
        return waits

    def feed_jobs(self, now: float) -> bool:
        """The idle group's starvation guard; the server calls it as it polls running jobs (every CPU_POLL_S at
        most). After two looks in a row in which the jobs got under STARVED_CORES and, in the second, waited for a
        core for STARVED_WAIT of it, make their group a normal one for NORMAL_HOLD_S; then idle again. The threads'
        waits are read only after a look that got that little, so jobs that get their cores cost one file read a
        look. Returns whether this look found the jobs starved."""
        if not self.jobs_idle:
            return False
        used = _used_ns(self.version, self.bases)  # all jobs together
        if used is None:
            return False
        if not self.idle_now:
            if now < self._normal_until:
                return False
            self._set_idle(True)
        last, self._look = self._look, (now, used)
        if last is None or now - last[0] > GUARD_STALE_S:
            self._waits = None
            return False
        if now - last[0] < GUARD_WINDOW_S:
            self._look = last
            return False
        if (used - last[1]) / 1e9 / (now - last[0]) >= STARVED_CORES:
            self._waits = None
            return False
        before, self._waits = self._waits, self._jobs_waits()
        if before is None:
            return False
        waited = sum(ns - before.get(tid, 0) for tid, ns in self._waits.items()) / 1e9
        if waited < STARVED_WAIT * (now - last[0]) or not self._set_idle(False):
            return False
        self._normal_until = now + NORMAL_HOLD_S
        self._waits = None
        return True

    def jobs_cores(self) -> float | None:
        """The cores all jobs together may use (the parent's cpu.max); None: no cap."""
        return round(self.jobs_quota_us / CFS_PERIOD_US, 3) if self.jobs_quota_us else None

    def _setup_v1(self) -> bool:
        mounts, own = _v1_mounts(), _own_paths()
        if not mounts:
            return False
        for ctrl in V1_CONTROLLERS:
            if ctrl in mounts and ctrl in own:
                parent = f"{mounts[ctrl]}{own[ctrl].rstrip('/')}"
                if ctrl == "cpu":
                    self.cores = _cores_of(parent, "v1")
                _remove_stale(parent)
                base = f"{parent}/{self._token}"
                try:
                    os.mkdir(base)
                except OSError as exc:
                    self.reason += f"{ctrl}: {exc.strerror}; "
                    continue
                self.bases[ctrl] = base
        self.version = "v1" if self.bases else "none"
        return bool(self.bases)

    def _setup_v2(self) -> bool:
        own = _own_paths().get("")
        root = Path("/sys/fs/cgroup")
        if own is None or not (root / "cgroup.controllers").exists():
            return False
        mine = root / own.lstrip("/")
        enabled = (mine / "cgroup.subtree_control").read_text().split()
        if not {"memory", "pids", "cpu"} <= set(enabled):
            self.reason = f"cgroup v2 controllers not delegated here (enabled: {' '.join(enabled) or 'none'})"
            return False
        self.cores = _cores_of(str(mine), "v2")
        base = mine / self._token
        base.mkdir()
        _write(f"{base}/cgroup.subtree_control", "+memory +pids +cpu")
        self.version, self.bases = "v2", {"unified": str(base)}
        return True

    @property
    def controllers(self) -> list[str]:
        """Return the controllers in force, e.g. ['memory', 'pids', 'cpu', 'cpuacct']."""
        if self.version == "v2":
            return ["memory", "pids", "cpu"]
        return sorted(self.bases)

    def new_job(self, limits, devices: list[tuple[int, int]] = ()) -> "JobCgroup | None":
        """Create the cgroups of one job with its limits applied; None when cgroups are unavailable.

        devices: the (major, minor) character devices the job may open (v1 devices controller); all others are
        refused with EPERM, even through a path to them that the job somehow has."""
        if not self.bases:
            return None
        self._counter += 1
        job = JobCgroup(self.version, {c: f"{b}/job-{self._counter}" for c, b in self.bases.items()},
                        max_quota_us=self.jobs_quota_us or int(self.cores * CFS_PERIOD_US))
        try:
            job.create(limits, devices)
        except OSError:
            job.remove()
            raise
        return job

    def remove(self) -> None:
        """Remove the server's parent groups (they are empty once every job was removed)."""
        for base in self.bases.values():
            try:
                os.rmdir(base)
            except OSError:
                pass


class JobCgroup:
    """The cgroups of one job.

    max_quota_us: the most CPU per CFS_PERIOD_US this job may be given (the parent's cap; cgroup v1 refuses a
    child's quota above its parent's with EINVAL)."""

    def __init__(self, version: str, dirs: dict[str, str], max_quota_us: int | None = None) -> None:
        self.version = version
        self.dirs = dirs
        self.max_quota_us = max_quota_us

    def to_dict(self) -> dict:
        """Return a JSON-ready dict (the zygote's child joins the groups by their directories)."""
        return {"version": self.version, "dirs": self.dirs}

    @classmethod
    def from_dict(cls, data: dict) -> "JobCgroup":
        """Rebuild the groups' handle from to_dict()'s output."""
        return cls(data["version"], dict(data["dirs"]))

    def create(self, limits, devices: list[tuple[int, int]] = ()) -> None:
        """Make the directories, allow only the given devices, and write the limits."""
        for d in self.dirs.values():
            os.mkdir(d)
        if "devices" in self.dirs:
            self.allow_only(devices)
        self.set_limits(limits)
        if self.version == "v2":  # a low weight against the web server
            _write(f"{self.dirs['unified']}/cpu.weight", JOB_CPU_WEIGHT)
        if "cpu" in self.dirs:
            _write(f"{self.dirs['cpu']}/cpu.cfs_period_us", CFS_PERIOD_US)
            _write(f"{self.dirs['cpu']}/cpu.shares", JOB_CPU_SHARES)
        self.set_cores(1)

    def set_cores(self, copies: int) -> None:
        """Let the job use `copies` cores at most (cpu.max): one per copy of the learner's program it runs at once.

        A graded job whose checks name other machines runs one copy per machine beside the graded run
        (app/harness/elsewhere.py); on one core they took turns and the verdict waited for their sum. The cap stays
        per copy, so one learner still cannot starve the others: every copy is the same program, under the same
        memory, pids, wall-clock and CPU-seconds limits of the one job, and the parent's cap bounds all jobs."""
        quota = max(1, copies) * CFS_PERIOD_US
        if self.max_quota_us is not None:
            quota = max(MIN_QUOTA_US, min(quota, self.max_quota_us))
        if self.version == "v2":
            _write(f"{self.dirs['unified']}/cpu.max", f"{quota} {CFS_PERIOD_US}")
        elif "cpu" in self.dirs:
            _write(f"{self.dirs['cpu']}/cpu.cfs_quota_us", quota)

    def allow_only(self, devices: list[tuple[int, int]]) -> None:
        """v1 devices controller: refuse every device, then allow read/write (no mknod) on these char devices."""
        d = self.dirs["devices"]
        _write(f"{d}/devices.deny", "a")
        for major, minor in devices:
            _write(f"{d}/devices.allow", f"c {major}:{minor} rw")

    def allowed_devices(self) -> list[str]:
        """Return the devices controller's list (e.g. ["c 1:3 rw", ...]); [] where there is none."""
        if "devices" not in self.dirs:
            return []
        return Path(f"{self.dirs['devices']}/devices.list").read_text().split("\n")[:-1]

    def set_limits(self, limits) -> None:
        """Write the memory and pids limits (at creation, or when a warm child is handed a job's own limits)."""
        if self.version == "v2":
            d = self.dirs["unified"]
            _write(f"{d}/memory.max", limits.memory_bytes)
            _write(f"{d}/memory.swap.max", 0)
            _write(f"{d}/pids.max", limits.pids)
            return
        if "memory" in self.dirs:  # memory before memsw: memsw may never be below it, and limits only go down
            _write(f"{self.dirs['memory']}/memory.limit_in_bytes", limits.memory_bytes)
            try:  # only present with swap accounting; keeps the job from swapping past its limit
                _write(f"{self.dirs['memory']}/memory.memsw.limit_in_bytes", limits.memory_bytes)
            except OSError:
                pass
        if "pids" in self.dirs:
            _write(f"{self.dirs['pids']}/pids.max", limits.pids)

    def join(self) -> None:
        """Move the calling process into every group of the job (called in the child, as root)."""
        pid = str(os.getpid())
        for d in self.dirs.values():
            _write(f"{d}/cgroup.procs", pid)

    def _procs_dir(self) -> str | None:
        return self.dirs.get("unified") or self.dirs.get("pids") or self.dirs.get("memory")

    def pids(self) -> list[int]:
        """Return every pid still in the job."""
        d = self._procs_dir()
        if d is None:
            return []
        try:
            return [int(p) for p in Path(f"{d}/cgroup.procs").read_text().split()]
        except OSError:
            return []

    def signal_all(self) -> None:
        """SIGKILL every process of the job once, without waiting for them to exit."""
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def sweep(self) -> int:
        """SIGKILL every process of the job until none is left; return how many were signalled."""
        killed = 0
        for _ in range(200):
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
                except ProcessLookupError:
                    pass
            time.sleep(0.005)
        return killed

    def cpu_seconds(self) -> float | None:
        """Return the CPU time the job used so far, in seconds."""
        used = _used_ns(self.version, self.dirs)
        return None if used is None else used / 1e9

    def oom_killed(self) -> bool:
        """Return whether the kernel's OOM killer killed a process of the job."""
        try:
            if self.version == "v2":
                text = Path(f"{self.dirs['unified']}/memory.events").read_text()
            elif "memory" in self.dirs:
                text = Path(f"{self.dirs['memory']}/memory.oom_control").read_text()
            else:
                return False
        except OSError:
            return False
        stats = dict(line.split() for line in text.splitlines() if len(line.split()) == 2)
        return int(stats.get("oom_kill", 0)) > 0

    def pids_refused(self) -> int:
        """How many forks or new threads the pids limit has refused in this job (pids.events' max); 0 without one."""
        d = self.dirs.get("unified") or self.dirs.get("pids")
        if d is None:
            return 0
        try:
            text = Path(f"{d}/pids.events").read_text()
        except OSError:
            return 0
        return next((int(line.split()[1]) for line in text.splitlines() if line.split()[:1] == ["max"]), 0)

    def try_remove(self) -> bool:
        """Remove the job's directories once, without waiting; return whether none is left (a group whose last
        processes are still exiting stays, for a later try)."""
        gone = True
        for d in self.dirs.values():
            try:
                os.rmdir(d)
            except FileNotFoundError:
                pass
            except OSError:
                gone = False
        return gone

    def remove(self) -> None:
        """Remove the job's directories (sweep first); retry briefly while the kernel finishes exits."""
        for d in self.dirs.values():
            for _ in range(100):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)
