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
    """Poll url until it answers; fail early if the server process died."""
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
def uvicorn_server(target: list[str], env: dict[str, str], ready_path: str = "/"):
    """Run `uvicorn <target...>` on a free port; yield (base_url, process); stop it afterwards."""
    port = free_port()
    cmd = [sys.executable, "-m", "uvicorn", *target, "--host", "127.0.0.1", "--port", str(port), *UVICORN_FLAGS]
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(base + ready_path, proc)
        yield base, proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@contextmanager
def site_server(workdir: Path, **overrides: str):
    """Run the real course site (production mode, its own SQLite file in workdir); yield (base_url, process)."""
    env = site_env(workdir, **overrides)
    migrate(env)
    with uvicorn_server(["--factory", "app.main:create_app"], env) as served:
        yield served
