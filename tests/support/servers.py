"""Start the real site under uvicorn in a subprocess, the way an operator would, for benchmarks and load tests."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import httpx

from app import ROOT

# The same uvicorn flags for our app and for the plain baseline, so the comparison is fair.
UVICORN_FLAGS = ["--no-access-log", "--log-level", "warning", "--timeout-graceful-shutdown", "5"]


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def site_env(workdir: Path, **overrides: str) -> dict[str, str]:
    """Environment for a production-like site whose database lives in workdir."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COURSE_")}
    env.update(COURSE_ENV="production", COURSE_SECRET_KEY=secrets.token_urlsafe(32),
               COURSE_DATABASE_URL=f"sqlite:///{workdir / 'course.db'}")
    env.update(overrides)
    return env


def migrate(env: dict[str, str]) -> None:
    """Bring the database named in env to the newest schema."""
    subprocess.run([sys.executable, "-m", "app.cli", "db", "upgrade"], env=env, cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)


def wait_ready(url: str, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    """Poll url until it answers below 500 (/readyz answers 503 while warming); fail early if the server died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before answering {url}")
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer within {timeout} s")


@contextmanager
def uvicorn_server(target: list[str], env: dict[str, str], ready_path: str = "/", ready_timeout: float = 60.0):
    """Run `uvicorn <target...>` on a free port; yield (base_url, process); stop it afterwards."""
    port = free_port()
    cmd = [sys.executable, "-m", "uvicorn", *target, "--host", "127.0.0.1", "--port", str(port), *UVICORN_FLAGS]
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(base + ready_path, proc, ready_timeout)
        yield base, proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


# seconds a fresh site may take to warm up (import torch in its sandbox server, grade one job) on a busy machine
WARM_TIMEOUT_S = 300.0


@contextmanager
def site_server(workdir: Path, *, until_ready: bool = False, **overrides: str):
    """Run the real course site (production mode, its own SQLite file in workdir); yield (base_url, process).

    until_ready: yield only once /readyz answers 200 (the sandbox warm, one job graded), as a load balancer sends
    learners to it; a benchmark that compares the site with a warm baseline must not time the warm-up, which
    otherwise runs in the background beside its first requests (torch's import alone is seconds of one core)."""
    env = site_env(workdir, **overrides)
    migrate(env)
    ready = ("/readyz", WARM_TIMEOUT_S) if until_ready else ("/", 60.0)
    with uvicorn_server(["--factory", "app.main:create_app"], env, *ready) as served:
        yield served
