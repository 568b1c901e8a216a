"""Lesson page throughput vs a plain framework response, both under the same uvicorn configuration.

Each server runs in its own process on one core; the load generator (raw asyncio streams, 64 keep-alive
connections) runs here. Runs alternate between the two servers and the medians are reported.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
from pathlib import Path

import httpx

from bench.loadgen import hammer
from tests.support.servers import UVICORN_FLAGS, site_env, site_server, uvicorn_server

LESSON = "/lessons/training-loop"
CONCURRENCY = 64
# seconds per measured run; several runs alternate between the servers
SECONDS = 4.0
RUNS = 3
# the lesson page must keep at least this fraction of a bare response's throughput
TARGET_RATIO = 0.7


def _measure(url: str) -> dict:
    asyncio.run(hammer(url, concurrency=8, seconds=1.0))  # warm-up: templates, caches, connections
    return asyncio.run(hammer(url, concurrency=CONCURRENCY, seconds=SECONDS)).summary()


def run(seconds: float = SECONDS, runs: int = RUNS) -> dict:
    """Measure our lesson page and the plain baseline; return the figures."""
    global SECONDS
    SECONDS = seconds
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        with site_server(work, until_ready=True) as (base, _):  # not while its sandbox warms up beside the pages
            body = httpx.get(base + LESSON).content
            (work / "body.html").write_bytes(body)
            env = site_env(work, COURSE_BENCH_PLAIN_BODY=str(work / "body.html"))
            with uvicorn_server(["bench._plain_app:app"], env, ready_path="/plain") as (plain, _):
                page, bare = [], []
                for _ in range(runs):
                    page.append(_measure(base + LESSON))
                    bare.append(_measure(plain + "/plain"))
    med = lambda rows, key: statistics.median(r[key] for r in rows)  # noqa: E731
    page_rps, plain_rps = med(page, "rps"), med(bare, "rps")
    out = {
        "page_rps": page_rps, "plain_rps": plain_rps,
        "page_throughput_ratio": round(page_rps / plain_rps, 3) if plain_rps else 0.0,
        "page_p99_ms": med(page, "p99_ms"), "plain_p99_ms": med(bare, "p99_ms"),
        "page_errors": sum(r["errors"] for r in page) + sum(r["statuses"].get(500, 0) for r in page),
        "page_bytes": len(body), "concurrency": CONCURRENCY, "uvicorn_flags": " ".join(UVICORN_FLAGS),
    }
    out["targets"] = {"page_throughput_ratio": {"target": f">= {TARGET_RATIO}",
                                                "met": out["page_throughput_ratio"] >= TARGET_RATIO}}
    return out


def table(fig: dict) -> str:
    """Render the figures as a Markdown table."""
    return "\n".join([
        "| lesson page | ours | plain response | ratio |", "|---|---|---|---|",
        f"| requests/s @{fig['concurrency']} | {fig['page_rps']:.0f} | {fig['plain_rps']:.0f} | "
        f"{fig['page_throughput_ratio']:.2f} (target >= {TARGET_RATIO}) |",
        f"| p99 latency ms | {fig['page_p99_ms']:.1f} | {fig['plain_p99_ms']:.1f} | |",
    ])


if __name__ == "__main__":
    figures = run()
    print(table(figures))
