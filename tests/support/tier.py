"""The worker tier as an operator runs it, for tests and benchmarks: `course worker` and `course serve` processes
(COURSE_RUNNER=celery) sharing one Redis and one database. Every process is a real subprocess on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from contextlib import contextmanager

import redis

from app import ROOT
from tests.support.servers import free_port, migrate, wait_ready
from tests.support.services import spawn

# seconds a worker gets to warm its sandbox (torch import, warm-up) on a loaded 2-core machine
WORKER_START_TIMEOUT_S = 180


def tier_env(database_url: str, broker_url: str, **overrides: str) -> dict[str, str]:
    """Environment for every process of one tier: celery runner, shared database and Redis, test-friendly limits."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COURSE_")}
    env.update(COURSE_ENV="production", COURSE_SECRET_KEY=secrets.token_urlsafe(32), COURSE_RUNNER="celery",
               COURSE_DATABASE_URL=database_url, COURSE_CELERY_BROKER_URL=broker_url,
               COURSE_SUBMISSION_RATE_LIMIT="100000/minute",
               COURSE_SUBMISSION_ADDRESS_RATE_LIMIT="100000/minute", COURSE_SANDBOX_PREFORK="1",
               # one test learner follows every exercise's run at once (13 streams); the per-learner cap of 8 is
               # tested in tests/web, not here
               COURSE_STREAMS_PER_LEARNER="1000")
    env.update(overrides)
    return env


def _stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 30) -> None:
    _stop_all([proc], sig, timeout)


def _stop_all(procs: list[subprocess.Popen], sig: int = signal.SIGTERM, timeout: float = 30) -> None:
    """Signal every process group first, then wait for each: their shutdowns (a worker's sandbox) overlap."""
    running = [proc for proc in procs if proc.poll() is None]
    for proc in running:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
    deadline = time.monotonic() + timeout
    for proc in running:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


class Tier:
    """Web servers and workers of one deployment; `.web[i]` is a base URL, `.workers[i]` a process."""

    def __init__(self, env: dict[str, str], log_dir) -> None:
        self.env = env
        self.log_dir = log_dir
        self.webs: list[tuple[str, subprocess.Popen]] = []
        self.workers: list[subprocess.Popen] = []
        self._starting: dict[subprocess.Popen, object] = {}  # spawned, not yet waited for: process -> its log
        self.redis = redis.Redis.from_url(env["COURSE_CELERY_BROKER_URL"], socket_connect_timeout=1)

    @property
    def web(self) -> list[str]:
        return [url for url, _ in self.webs]

    def start_worker(self, concurrency: int = 1, queues: str = "cpu,gpu") -> subprocess.Popen:
        """Start one `course worker` and wait until it reports itself to Redis with a warm sandbox."""
        proc = self.spawn_worker(concurrency, queues)
        self.wait_worker(proc)
        return proc

    def spawn_worker(self, concurrency: int = 1, queues: str = "cpu,gpu") -> subprocess.Popen:
        """Start one `course worker` without waiting for it (see wait_worker): a tier starts all of its processes
        at once, so their imports and sandbox warm-ups share the machine's cores instead of taking turns."""
        log = self.log_dir / f"worker-{len(self.workers) + len(self._starting)}.log"
        with open(log, "ab") as out:  # the child keeps its own copy of the descriptor
            proc = spawn([sys.executable, "-m", "app.cli", "worker", "--queues", queues, "--concurrency",
                                     str(concurrency), "--loglevel", "WARNING"], env=self.env, cwd=ROOT,
                                    stdout=out, stderr=out, start_new_session=True)
        self._starting[proc] = log
        return proc

    def wait_worker(self, proc: subprocess.Popen) -> None:
        """Wait until a spawned worker reports itself to Redis (its name holds its pid) and Celery in it consumes."""
        log = self._starting[proc]
        deadline = time.monotonic() + WORKER_START_TIMEOUT_S
        while not any(f":{proc.pid}:" in name for name in self.live_workers()):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"course worker did not come up (exit {proc.poll()}); see {log}")
            time.sleep(0.1)
        self._wait_consuming(proc, deadline)
        del self._starting[proc]
        self.workers.append(proc)

    def _wait_consuming(self, proc: subprocess.Popen, deadline: float) -> None:
        """Wait until Celery in this worker consumes (its sandbox is warm before it starts consuming)."""
        from celery import Celery

        app = Celery(broker=self.env["COURSE_CELERY_BROKER_URL"], set_as_current=False)
        try:
            while time.monotonic() < deadline:
                replies = app.control.ping(timeout=0.5) or []
                if any(str(proc.pid) in name for reply in replies for name in reply):
                    return
                if proc.poll() is not None:
                    raise RuntimeError(f"course worker exited with {proc.returncode}")
        finally:
            app.close()
        raise RuntimeError("course worker did not start consuming in time")

    def live_workers(self) -> dict[str, dict]:
        """Return the workers that reported to Redis within their lease (name -> report)."""
        try:
            keys = list(self.redis.scan_iter(match="course:worker:*"))
            return {k.decode(): json.loads(v) for k, v in zip(keys, self.redis.mget(keys)) if v} if keys else {}
        except redis.RedisError:
            return {}

    def start_web(self, port: int | None = None) -> str:
        """Start one `course serve` (on `port`, or a free one) and wait until it answers; return its URL."""
        url, proc = self.spawn_web(port)
        self.wait_web(url, proc)
        return url

    def spawn_web(self, port: int | None = None) -> tuple[str, subprocess.Popen]:
        """Start one `course serve` without waiting for it (see wait_web); return its URL and process."""
        port = port or free_port()
        with open(self.log_dir / f"web-{port}.log", "ab") as out:
            proc = spawn([sys.executable, "-m", "app.cli", "serve", "--port", str(port)], env=self.env,
                                    cwd=ROOT, stdout=out, stderr=out, start_new_session=True)
        self._starting[proc] = self.log_dir / f"web-{port}.log"
        return f"http://127.0.0.1:{port}", proc

    def wait_web(self, url: str, proc: subprocess.Popen) -> None:
        """Wait until a spawned web server answers /healthz."""
        wait_ready(url + "/healthz", proc)
        del self._starting[proc]
        self.webs.append((url, proc))

    def restart_web(self, index: int) -> str:
        """Stop web server `index` (SIGTERM, as a deploy would) and start it again on the same port."""
        url, proc = self.webs[index]
        _stop(proc)
        self.start_web(int(url.rsplit(":", 1)[1]))
        self.webs[index] = self.webs.pop()
        return url

    def kill_worker(self, proc: subprocess.Popen) -> None:
        """SIGKILL a worker process (its fork server follows: PR_SET_PDEATHSIG)."""
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        self.workers.remove(proc)

    def close(self) -> None:
        """Stop every process of the tier."""
        # a start that failed leaves its siblings in _starting: they were spawned too
        _stop_all([proc for _, proc in self.webs] + self.workers + list(self._starting))
        self.redis.close()


@contextmanager
def tier(database_url: str, broker_url: str, log_dir, *, webs: int = 2, workers: int = 2, concurrency: int = 1,
         **overrides: str):
    """Migrate the database, start `workers` workers and `webs` web servers; yield the Tier; stop it all."""
    env = tier_env(database_url, broker_url, **overrides)
    migrate(env)
    running = Tier(env, log_dir)
    try:
        # every process starts at once (each is mostly one CPU-bound interpreter importing torch), then each is
        # waited for: on two cores the tier is up in about half the time it took one after the other
        starting = [running.spawn_worker(concurrency) for _ in range(workers)]
        serving = [running.spawn_web() for _ in range(webs)]
        for proc in starting:
            running.wait_worker(proc)
        for url, proc in serving:
            running.wait_web(url, proc)
        yield running
    finally:
        running.close()


__all__ = ["Tier", "tier", "tier_env"]
