"""One Redis Stream per job: what a worker writes as the job runs, and what any web server reads back.

A worker appends entries with XADD (output lines, the result, a submission's verdict); a reader follows with
XREAD BLOCK from the last id it saw. Entry ids are Redis's own (`1733222400000-0`), so they double as SSE event
ids: a page that reconnects with Last-Event-ID gets exactly the entries after it, from whichever web server it
reaches. Redis Pub/Sub would lose what was said while nobody listened; a stream keeps it until its TTL.

Each entry has one field, `e`: JSON `{"kind": ..., "data": {...}}`. Kinds: `start` (a worker began an attempt;
a later one means the job restarted elsewhere), `output` (a plain job's line, {"stream", "line"}, or a
submission's batch of lines, {"lines": [{"stream", "line"}], ...}, as the page gets it: app/runner/batches.py),
`done` (a Result, for plain jobs), `verdict` (a submission's stored Verdict JSON).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from app.runner.batches import OutputBatcher

log = logging.getLogger(__name__)

PREFIX = "course:events:"
# entries kept per stream (approximately: MAXLEN ~); the sandbox caps output at 1 MiB, rarely this many lines
MAXLEN = 20_000
# milliseconds one XREAD waits; then the reader looks at the job another way (its database row, a deadline)
BLOCK_MS = 1000
# seconds between flushes of buffered output: lines arrive in bursts, one pipelined XADD per burst is cheap
FLUSH_S = 0.02
# seconds a writer keeps retrying its last entries while Redis is down before giving them up (the database
# keeps the verdict; readers fall back to it)
GIVE_UP_S = 60.0


def key(job_id: str) -> str:
    """Return the Redis key of a job's stream."""
    return PREFIX + job_id


def connect(url: str) -> aioredis.Redis:
    """Return an asyncio Redis client for the streams (short timeouts: a dead Redis must be noticed fast)."""
    return aioredis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=10, health_check_interval=15)


class EventWriter:
    """Appends a job's events to its stream, batching lines and riding out short Redis outages."""

    def __init__(self, client: aioredis.Redis, job_id: str, ttl_s: int) -> None:
        self.client = client
        self.key = key(job_id)
        self.ttl_s = ttl_s
        self._pending: list[str] = []
        self._lock = asyncio.Lock()
        self._batcher = OutputBatcher()

    def add_line(self, stream: str, line: str) -> None:
        """Buffer one output line of a submission: lines go out as batches, one entry each, the stream capped."""
        batch = self._batcher.add(stream, line)
        if batch is not None:
            self.add_batch(batch)

    def end_output(self) -> None:
        """The program ended: buffer what output is left (the tail of a capped stream) before the next entry."""
        for batch in self._batcher.close():
            self.add_batch(batch)

    def add_batch(self, batch) -> None:
        """Buffer one batch as an `output` entry carrying its position (`upto`), which readers turn into ids."""
        self.add("output", {**batch.data(), "upto": list(batch.upto)})

    def add(self, kind: str, data: dict) -> None:
        """Buffer one event; the next flush sends it."""
        self._pending.append(json.dumps({"kind": kind, "data": data}))
        if len(self._pending) > MAXLEN:  # Redis has been down a while during an output flood: keep the newest
            del self._pending[: len(self._pending) - MAXLEN]

    async def flush(self) -> bool:
        """Send what is buffered in one round trip; keep it for the next flush if Redis is unreachable."""
        if self._batcher.due():
            self.add_batch(self._batcher.take())
        async with self._lock:
            if not self._pending:
                return True
            batch, self._pending = self._pending, []
            try:
                async with self.client.pipeline(transaction=False) as pipe:
                    for entry in batch:
                        pipe.xadd(self.key, {"e": entry}, maxlen=MAXLEN, approximate=True)
                    pipe.expire(self.key, self.ttl_s)
                    await pipe.execute()
                return True
            except (RedisError, OSError) as exc:
                self._pending[:0] = batch
                log.warning("could not write %d event(s) to %s: %s", len(batch), self.key, exc)
                return False

    async def send(self, kind: str, data: dict, *, give_up_s: float = GIVE_UP_S) -> bool:
        """Send one event now, with anything buffered before it, retrying while Redis is down."""
        self.add(kind, data)
        deadline = time.monotonic() + give_up_s
        while not await self.flush():
            if time.monotonic() > deadline:
                log.error("gave up writing %d event(s) to %s", len(self._pending), self.key)
                self._pending.clear()
                return False
            await asyncio.sleep(0.5)
        return True

    async def flush_every(self, seconds: float = FLUSH_S) -> None:
        """Flush in the background until cancelled."""
        while True:
            await asyncio.sleep(seconds)
            await self.flush()


def decode(entries) -> list[tuple[str, str, dict]]:
    """Turn XREAD's entries into (entry id, kind, data)."""
    out = []
    for entry_id, fields in entries:
        event = json.loads(fields[b"e"])
        out.append((entry_id.decode(), event["kind"], event["data"]))
    return out


async def read(client: aioredis.Redis, job_id: str, after: str = "0", block_ms: int | None = BLOCK_MS):
    """Return the entries after id `after` (waiting up to block_ms for the first, None: not at all); [] if none."""
    answer = await client.xread({key(job_id): after}, count=1000, block=block_ms)
    return decode(answer[0][1]) if answer else []


# a Redis Stream entry id: two 64-bit numbers in ASCII digits (str.isdigit also takes "\xb2" and "\u0663")
ENTRY_ID = re.compile(r"[0-9]{1,20}-[0-9]{1,20}", re.ASCII)


# an SSE id on the tier: the entry's id, and for output how far into stdout and stderr it reaches
RESUME_ID = re.compile(r"([0-9]{1,20}-[0-9]{1,20})(?:/([0-9]{1,18}):([0-9]{1,18}))?", re.ASCII)


def valid_id(value: str | None) -> str | None:
    """Return a stream entry id given by a client (Last-Event-ID) if it is one, else None."""
    if not value:
        return None
    return value if ENTRY_ID.fullmatch(value) else None


def event_id(entry_id: str, upto: tuple[int, int] | None) -> str:
    """Return the SSE id of an entry: `<entry id>/<stdout lines>:<stderr lines>` for output, else the entry id."""
    return entry_id if upto is None else f"{entry_id}/{upto[0]}:{upto[1]}"


def resume_point(value: str | None) -> tuple[str, tuple[int, int] | None] | None:
    """Return (entry id, position or None) from a Last-Event-ID `event_id` made; None for anything else."""
    found = RESUME_ID.fullmatch(value or "")
    if found is None:
        return None
    return found[1], (int(found[2]), int(found[3])) if found[2] is not None else None


__all__ = ["key", "connect", "EventWriter", "read", "decode", "valid_id", "event_id", "resume_point", "PREFIX",
           "BLOCK_MS"]
