"""Simulated learners and readers for load tests and benchmarks: each one its own session, CSRF token and learner."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import time
from dataclasses import dataclass, field
from functools import cache

import httpx

from app import ROOT

EXERCISES = ("same-device", "pick-device", "training-loop", "bring-it-back")

# These clients are the load generator of bench.load and share the 2 cores with the server they measure, so CPU
# they spend on nothing is taken from the site (bench/README.md). Two such costs, neither of which changes a byte
# sent or received:
# - httpcore asks `import sniffio` before each connection's locks and each request (httpcore/_synchronization.py);
#   sniffio is not installed (the lock has none), and a failed import is not remembered, so each one searched
#   sys.path again: ~30 us, about once per request. Marking it missing in sys.modules makes the same
#   ImportError immediate; httpcore goes on as before ("asyncio").
if importlib.util.find_spec("sniffio") is None:
    sys.modules.setdefault("sniffio", None)


@cache
def tls_context():
    """httpx's own default TLS context (certifi's CA bundle), built once: each AsyncClient otherwise builds one,
    ~15 ms of CPU (loading the bundle), even for the http:// URLs these clients use; 82 clients in bench.load."""
    return httpx.create_ssl_context()


def solutions() -> dict[str, str]:
    """Return each exercise's reference solution, keyed by slug."""
    return {slug: (ROOT / "exercises" / slug / "solution.py").read_text(encoding="utf-8") for slug in EXERCISES}


@dataclass
class Outcome:
    """What one submission attempt came to."""

    exercise: str
    http_status: int
    submission_id: str | None = None
    verdict: dict | None = None
    retry_after: str | None = None
    seconds: float = 0.0


class Learner:
    """One browser's worth of state: its own session cookie, CSRF token and (anonymous) learner id."""

    def __init__(self, base_url: str, *, timeout: float = 120.0) -> None:
        self.client = httpx.AsyncClient(base_url=base_url, timeout=timeout, verify=tls_context())
        self.cookie = ""

    async def __aenter__(self) -> "Learner":
        response = await self.client.get("/api/auth/csrf")
        response.raise_for_status()
        self._keep_cookie(response)
        self.client.headers["X-CSRF-Token"] = response.json()["csrf_token"]
        return self

    async def __aexit__(self, *exc) -> None:
        await self.client.aclose()

    def _keep_cookie(self, response: httpx.Response) -> None:
        # production cookies are Secure, which httpx keeps to itself over http://; carry the session by hand
        if response.cookies:
            self.cookie = "; ".join(f"{k}={v}" for k, v in response.cookies.items())
            self.client.headers["Cookie"] = self.cookie

    async def request(self, method: str, url: str, **kw) -> httpx.Response:
        """Send one request in this learner's session."""
        response = await self.client.request(method, url, **kw)
        self._keep_cookie(response)
        return response

    async def submit(self, exercise: str, code: str) -> Outcome:
        """Submit code; on 202 wait for the verdict over SSE; return the outcome."""
        start = time.perf_counter()
        response = await self.request("POST", f"/api/exercises/{exercise}/submissions", json={"code": code})
        outcome = Outcome(exercise, response.status_code, retry_after=response.headers.get("retry-after"))
        if response.status_code == 202:
            outcome.submission_id = response.json()["id"]
            outcome.verdict = await self.wait_verdict(outcome.submission_id)
        outcome.seconds = time.perf_counter() - start
        return outcome

    async def wait_verdict(self, submission_id: str) -> dict | None:
        """Read the submission's event stream until its verdict event."""
        event = None
        async with self.client.stream("GET", f"/api/submissions/{submission_id}/events") as stream:
            async for line in stream.aiter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event == "verdict":
                    return json.loads(line[6:])
        return None

    async def progress(self) -> dict:
        """Return this learner's progress as the API reports it."""
        response = await self.request("GET", "/api/progress")
        response.raise_for_status()
        return response.json()


@dataclass
class ReaderStats:
    """Lesson page reads seen by the readers."""

    statuses: dict[int, int] = field(default_factory=dict)
    latencies_ms: list[float] = field(default_factory=list)

    def pct(self, p: float) -> float:
        data = sorted(self.latencies_ms)
        return data[min(len(data) - 1, int(round(p / 100 * (len(data) - 1))))] if data else float("nan")


async def read_pages(base_url: str, readers: int, stop: asyncio.Event, stats: ReaderStats,
                     lessons: tuple[str, ...] = ("cpu-gpu-border", "picking-a-device", "multi-gpu-and-distributed",
                                                 "training-loop"), max_reads: int = 10_000,
                     think_s: float = 0.0) -> None:
    """Have `readers` clients read lesson pages in turn until stop is set (or max_reads each).

    think_s is the pause between a reader's pages: 0 makes each reader a flat-out load generator (throughput
    tests); a person reading takes far longer, and a small pause keeps the offered load below what the server
    can do, so latency measures the server rather than the readers' own queue. With a pause, readers start
    spread over one pause and each one's first page (its connection set-up, costly on the client's side) is not
    counted: otherwise all readers open connections and fire in one synchronised burst, and the first second's
    queue of 20 simultaneous requests is most of the p99, with no server-side cause.
    """
    async def reader(n: int) -> None:
        async with httpx.AsyncClient(base_url=base_url, timeout=30, verify=tls_context()) as client:
            if think_s:
                await asyncio.sleep(think_s * n / readers)
                await client.get(f"/lessons/{lessons[n % len(lessons)]}")  # connection set-up, not counted
            for i in range(max_reads):
                if stop.is_set():
                    return
                t0 = time.perf_counter()
                response = await client.get(f"/lessons/{lessons[(n + i) % len(lessons)]}")
                stats.latencies_ms.append((time.perf_counter() - t0) * 1000)
                stats.statuses[response.status_code] = stats.statuses.get(response.status_code, 0) + 1
                if think_s:
                    await asyncio.sleep(think_s)
    await asyncio.gather(*(reader(n) for n in range(readers)))
