"""A small keep-alive HTTP/1.1 load generator on asyncio streams.

httpx costs more CPU per request than the server under test does, and on a 2-core machine the client would
then measure itself; raw streams keep the client cheap so the ratio between two servers means something.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit


@dataclass
class LoadStats:
    """What one load run saw."""

    requests: int = 0
    errors: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    latencies_ms: list[float] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def pct(self, p: float) -> float:
        """Return the p-th percentile latency in ms (p in 0..100)."""
        if not self.latencies_ms:
            return float("nan")
        data = sorted(self.latencies_ms)
        return data[min(len(data) - 1, int(round(p / 100 * (len(data) - 1))))]

    def summary(self) -> dict:
        return {"requests": self.requests, "errors": self.errors, "rps": round(self.rps, 1),
                "p50_ms": round(self.pct(50), 2), "p99_ms": round(self.pct(99), 2),
                "mean_ms": round(statistics.fmean(self.latencies_ms), 2) if self.latencies_ms else None,
                "statuses": self.statuses}


async def _read_response(reader: asyncio.StreamReader) -> int:
    """Read one response; return its status code."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for line in lines[1:]:
        if line.lower().startswith("content-length:"):
            length = int(line.split(":", 1)[1])
    if length:
        await reader.readexactly(length)
    return status


async def _client(url: str, deadline: float, stats: LoadStats, max_requests: int | None) -> None:
    parts = urlsplit(url)
    request = (f"GET {parts.path or '/'} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
               "Connection: keep-alive\r\n\r\n").encode()
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    try:
        while time.perf_counter() < deadline and (max_requests is None or stats.requests < max_requests):
            t0 = time.perf_counter()
            writer.write(request)
            try:
                status = await _read_response(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                stats.errors += 1
                return
            stats.latencies_ms.append((time.perf_counter() - t0) * 1000)
            stats.requests += 1
            stats.statuses[status] = stats.statuses.get(status, 0) + 1
    finally:
        writer.close()


async def hammer(url: str, *, concurrency: int, seconds: float, max_requests: int | None = None) -> LoadStats:
    """GET url from `concurrency` keep-alive connections for `seconds`; return what was seen."""
    stats = LoadStats()
    start = time.perf_counter()
    await asyncio.gather(*(_client(url, start + seconds, stats, max_requests) for _ in range(concurrency)))
    stats.seconds = time.perf_counter() - start
    return stats
