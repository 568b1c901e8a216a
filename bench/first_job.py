"""What the first learner after a start waits for, beside the learners after them.

SITES fresh sites (uvicorn in production mode, each its own SQLite file, the embedded runner) are started one after
another; once a site's `GET /readyz` answers 200, `training-loop`'s solution is POSTed and its event stream read to
the first `output` event: the first job after ready, submit to first output. Then LATER more submissions of the same
code on that site, timed the same way. `first_job_over_later` is the median of the SITES first jobs over the p50
of all later ones, target <= 1.0 (the issue's "no slower than later jobs"). One first job against a p50 was a coin
toss even with nothing to tell them apart (0.79 and 1.21 on two runs of the same code); the median of three firsts
is not. Beside it, in the same run, a second fresh site whose first
job is submitted as soon as its pages answer, without waiting for /readyz: what the first learner waited for
before the server warmed itself (`first_job_before_ready_ms`), and how long the warming took (`warm_s`).

Run alone with `python -m bench first_job`.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from app import ROOT
from tests.support.servers import site_server

EXERCISE = "training-loop"
SITES = 3  # fresh sites, each one first job
LATER = 4  # later jobs per site
RESULTS = ROOT / "bench" / "results" / "first_job.json"
READY_TIMEOUT_S = 300


def first_output_ms(client: httpx.Client, code: str) -> float:
    """Submit once; return the milliseconds from the POST to the first output event (then read to the verdict)."""
    start = time.perf_counter()
    response = client.post(f"/api/exercises/{EXERCISE}/submissions", json={"code": code})
    response.raise_for_status()
    first, event = None, None
    with client.stream("GET", f"/api/submissions/{response.json()['id']}/events") as stream:
        for line in stream.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
                if event == "output" and first is None:
                    first = (time.perf_counter() - start) * 1000
            elif line.startswith("data: ") and event == "verdict":
                if json.loads(line[6:])["status"] != "passed":
                    raise RuntimeError(f"{EXERCISE}'s solution did not pass: {line[6:300]}")
                if first is None:
                    raise RuntimeError("the job printed nothing before its verdict")
                return first
    raise RuntimeError("the event stream ended without a verdict")


@contextmanager
def learner(base: str) -> Iterator[httpx.Client]:
    """Yield a client with a session and its CSRF token, as a browser has."""
    with httpx.Client(base_url=base, timeout=READY_TIMEOUT_S) as client:
        first = client.get("/api/auth/csrf")
        client.headers["X-CSRF-Token"] = first.json()["csrf_token"]
        # production cookies are Secure, which an http:// client keeps to itself; send the session by hand
        client.headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in first.cookies.items())
        yield client


def wait_ready(base: str) -> dict:
    """Poll /readyz until 200; return its answer."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        response = httpx.get(base + "/readyz", timeout=10)
        if response.status_code == 200:
            return response.json()
        time.sleep(0.05)
    raise TimeoutError(f"/readyz did not answer 200 within {READY_TIMEOUT_S} s")


def run() -> dict:
    """Measure the first job before and after ready, and the later ones; return the figures (also as JSON)."""
    code = (ROOT / "exercises" / EXERCISE / "solution.py").read_text(encoding="utf-8")
    limits = {"COURSE_SUBMISSION_RATE_LIMIT": "10000/minute", "COURSE_SUBMISSION_ADDRESS_RATE_LIMIT": "10000/minute"}
    figures: dict = {}
    with tempfile.TemporaryDirectory() as tmp, site_server(Path(tmp), **limits) as (base, _proc):
        with learner(base) as client:  # before ready: the first learner of a server that did not warm itself
            figures["first_job_before_ready_ms"] = round(first_output_ms(client, code), 1)
    firsts, later, ready, cold_starts = [], [], {}, 0
    for _ in range(SITES):
        with tempfile.TemporaryDirectory() as tmp, site_server(Path(tmp), **limits) as (base, _proc):
            ready = wait_ready(base)
            with learner(base) as client:
                firsts.append(first_output_ms(client, code))
                later += [first_output_ms(client, code) for _ in range(LATER)]
            cold_starts += httpx.get(base + "/readyz", timeout=10).json().get("cold_starts") or 0
    first, later_p50 = statistics.median(firsts), statistics.median(later)
    figures.update({
        "first_job_ms": round(first, 1),
        "first_jobs_ms": [round(f, 1) for f in firsts],
        "later_jobs_p50_ms": round(later_p50, 1),
        "later_jobs": len(later),
        "first_job_over_later": round(first / later_p50, 3),
        "warm_s": ready.get("warm_s"),
        "warm_job_ms": (ready.get("warm_job") or {}).get("ms"),
        "cold_starts": cold_starts,
    })
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n")
    return figures


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
