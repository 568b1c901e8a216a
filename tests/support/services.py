"""Real Redis and PostgreSQL servers from Debian's packages, started in a temporary directory on a free port, for
tests and benchmarks of the worker tier. `make system-deps` installs both; nothing here installs anything.

PostgreSQL's initdb refuses to run as root: as root, the cluster belongs to `nobody` (its files in a directory
made for it); as anyone else, to that user.
"""

from __future__ import annotations

import ctypes
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.support.servers import free_port

REDIS_SERVER = "/usr/bin/redis-server"
PR_SET_PDEATHSIG = 1
# seconds a server gets to start or stop on a loaded 2-core machine
START_TIMEOUT_S = 60


def die_with_parent() -> None:
    """In a child before exec: be sent SIGTERM when its parent goes (a test run killed midway must not leave
    servers behind). Runs after any uid change, which would clear it."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


# The parent-death signal follows the *thread* that forked, not the process: children are started from this one
# thread, which lives as long as the process, so a server started from a short-lived thread does not die with it.
_SPAWNER = ThreadPoolExecutor(1, thread_name_prefix="course-spawner")


def spawn(args: list[str], **kw) -> subprocess.Popen:
    """Start a child process that dies with this process (see die_with_parent)."""
    return _SPAWNER.submit(subprocess.Popen, args, preexec_fn=die_with_parent, **kw).result()


def _wait(check, what: str, timeout: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise TimeoutError(f"{what} within {timeout:.0f} s")


class RedisServer:
    """redis-server on 127.0.0.1:<free port>, data (append-only file) in its own temp dir; stop/start keep it."""

    def __init__(self) -> None:
        if not os.access(REDIS_SERVER, os.X_OK):
            raise RuntimeError(f"{REDIS_SERVER} is missing; run `make system-deps` (apt-get install redis-server)")
        self.dir = Path(tempfile.mkdtemp(prefix="course-redis-"))
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None

    def start(self) -> RedisServer:
        """Start the server (again, on the same port and data) and wait until it answers."""
        # appendonly: jobs on the queue survive a restart, as in compose.yaml; no RDB snapshots
        self.proc = spawn(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
             "--appendonly", "yes", "--appendfsync", "everysec", "--save", "", "--protected-mode", "no",
             "--logfile", str(self.dir / "redis.log")], start_new_session=True)
        _wait(self.answers, f"redis-server did not answer on port {self.port}")
        return self

    def answers(self) -> bool:
        """Say whether the server answers PING."""
        import redis

        try:
            return bool(redis.Redis(port=self.port, socket_connect_timeout=0.5).ping())
        except redis.RedisError:
            return False

    def stop(self) -> None:
        """Stop the server as `docker stop` would (SIGTERM: it writes its append-only file and exits)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(START_TIMEOUT_S)

    def close(self) -> None:
        """Stop the server and remove its data."""
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


def postgres_bin() -> Path:
    """Return Debian's PostgreSQL binaries folder (/usr/lib/postgresql/<version>/bin), newest version first."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if not found:
        raise RuntimeError("PostgreSQL is missing; run `make system-deps` (apt-get install postgresql)")
    return Path(found[-1]).parent


class PostgresServer:
    """A throwaway PostgreSQL cluster on 127.0.0.1:<free port>, owned by an unprivileged user, trust auth.

    Durability is switched off (fsync, synchronous_commit): it holds test data only and must start fast.
    """

    def __init__(self, user: str | None = None) -> None:
        self.bin = postgres_bin()
        self.user = user or ("nobody" if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name)
        self.dir = Path(tempfile.mkdtemp(prefix="course-pg-"))
        self.port = free_port()
        self.superuser = "course"
        self.proc: subprocess.Popen | None = None

    def _as_owner(self) -> dict:
        """Popen keywords that run a command as the cluster's owner (only root can switch)."""
        if os.geteuid() != 0:
            return {}
        entry = pwd.getpwnam(self.user)
        return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}

    def start(self) -> PostgresServer:
        """Create the cluster, start `postgres` as a child of this process, and wait until it takes connections."""
        entry = pwd.getpwnam(self.user)
        os.chown(self.dir, entry.pw_uid, entry.pw_gid)
        data = self.dir / "data"
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
        subprocess.run([str(self.bin / "initdb"), "-D", str(data), "-U", self.superuser, "--auth=trust", "-E",
                        "UTF8", "--no-sync", "--locale=C"], check=True, capture_output=True, cwd=self.dir, env=env,
                       **self._as_owner())
        # not pg_ctl, which detaches the server: a child dies with the test run (die_with_parent)
        with open(self.dir / "log", "ab") as log:
            self.proc = spawn(
                [str(self.bin / "postgres"), "-D", str(data), "-p", str(self.port), "-k", str(self.dir),
                 "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
                 "-c", "full_page_writes=off", "-c", "max_connections=200"],
                stdout=log, stderr=log, cwd=self.dir, env=env, start_new_session=True, **self._as_owner())
        _wait(self.answers, f"PostgreSQL did not take connections on port {self.port} (see {self.dir}/log)")
        return self

    def answers(self) -> bool:
        """Say whether the server takes connections."""
        import psycopg

        if self.proc.poll() is not None:
            raise RuntimeError(f"PostgreSQL exited with {self.proc.returncode}; see {self.dir}/log")
        try:
            psycopg.connect(f"host=127.0.0.1 port={self.port} user={self.superuser} dbname=postgres",
                            connect_timeout=1).close()
            return True
        except psycopg.OperationalError:
            return False

    def url(self, database: str = "postgres") -> str:
        """Return the SQLAlchemy URL of a database on this server."""
        return f"postgresql+psycopg://{self.superuser}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str, template: str | None = None) -> str:
        """Create a database (a copy of `template` when given) and return its URL."""
        import psycopg

        with psycopg.connect(f"host=127.0.0.1 port={self.port} user={self.superuser} dbname=postgres",
                             autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
        return self.url(name)

    def close(self) -> None:
        """Stop the server (a fast shutdown) and remove the cluster."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(START_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["RedisServer", "PostgresServer", "postgres_bin", "spawn"]
