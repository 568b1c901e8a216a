"""A program's output on its way to the page: lines coalesced into batches, the live stream capped.

The sandbox keeps up to 1 MiB of a program's output, and the stored verdict holds all of it. Sent one SSE event
per line, a one-second `while True: print(...)` became some 96,000 events and a verdict that reached the page 23 s
after the job had ended. So lines travel in batches: one event per BATCH_S, or sooner when a batch reaches
BATCH_LINES lines or BATCH_BYTES bytes. And the live stream is capped well below the stored output: it carries
the first LIVE_LINES lines (LIVE_BYTES at most), then only counts what it leaves out, and when the program ends
it sends the last TAIL_LINES lines, so a traceback after a flood is still seen live.

Every line carries its number within its stream (`stdout` line 1, 2, ...; `stderr` line 1, 2, ...), and every
batch says how far into each stream it reaches (`upto`). That position, not the batch's index, is the event id
(`"<stdout lines>:<stderr lines>"`): batch boundaries depend on timing, the positions do not, so a page that
reconnects with Last-Event-ID gets exactly the lines after it, whether the rest comes from the live run or is
rebuilt from the stored verdict (`stored_batches`).

Both event paths use it: LiveHub (app/submissions/live.py) for the embedded runner, and the worker tier
(app/worker/service.py), which writes one Redis Stream entry per batch.
"""

from __future__ import annotations

import collections
import re
import time
from dataclasses import dataclass, field

# seconds a line may wait for others to share its event: short enough to read as live
BATCH_S = 0.05
# lines and bytes that end a batch before BATCH_S is up (a flood fills one in well under a millisecond)
BATCH_LINES = 500
BATCH_BYTES = 32 << 10
# lines and bytes sent live before the stream only counts; the page shows 2000 lines, the stored output has 1 MiB
LIVE_LINES = 2000
LIVE_BYTES = 128 << 10
# lines sent at the end after a capped stream: the program's last words (a traceback) stay visible
TAIL_LINES = 100
STREAMS = ("stdout", "stderr")


@dataclass
class Batch:
    """Consecutive output lines for one event, each `(stream, number in its stream, text)`."""

    lines: list[tuple[str, int, str]]
    upto: tuple[int, int]  # lines of stdout and of stderr the program had printed by the end of this batch
    skipped: int = 0  # lines left out of the live stream just before these (the stored output has them)
    capped: bool = False  # from here on the live stream leaves lines out

    @property
    def id(self) -> str:
        """The SSE event id: how far into each stream this batch reaches."""
        return position_id(self.upto)

    def data(self) -> dict:
        """The `output` event's JSON: {"lines": [{"stream", "line"}], "skipped"?: N, "capped"?: true}."""
        out: dict = {"lines": [{"stream": s, "line": text} for s, _n, text in self.lines]}
        if self.skipped:
            out["skipped"] = self.skipped
        if self.capped:
            out["capped"] = True
        return out

    def after(self, seen: tuple[int, int]) -> Batch | None:
        """This batch without the lines a page has already seen (`seen`: its position); None when nothing is left."""
        if self.upto[0] <= seen[0] and self.upto[1] <= seen[1]:
            return None
        lines = [line for line in self.lines if line[1] > seen[STREAMS.index(line[0])]]
        return Batch(lines, self.upto, self.skipped, self.capped)


def position_id(upto: tuple[int, int]) -> str:
    """Return the event id of a position: `"<stdout lines>:<stderr lines>"`."""
    return f"{upto[0]}:{upto[1]}"


# an event id: two line counts in ASCII digits (str.isdigit also takes "\xb2", which int() refuses, and
# int() refuses more than 4300 digits); anything else is no position, and the stream replays from the start
POSITION_ID = re.compile(r"([0-9]{1,18}):([0-9]{1,18})", re.ASCII)


def parse_position(value: str | None) -> tuple[int, int] | None:
    """Return the position an event id names (Last-Event-ID), or None for anything else."""
    found = POSITION_ID.fullmatch(value or "")
    return (int(found[1]), int(found[2])) if found else None


@dataclass
class OutputBatcher:
    """Collects one run's output lines into batches; the caller decides when to send (`due`, `take`, `close`)."""

    pending: list[tuple[str, int, str]] = field(default_factory=list)
    counts: list[int] = field(default_factory=lambda: [0, 0])
    live_lines: int = 0
    live_bytes: int = 0
    capped: bool = False
    skipped: int = 0
    _pending_bytes: int = 0
    _first_at: float | None = None
    _cap_announced: bool = False
    _tail: collections.deque = field(default_factory=lambda: collections.deque(maxlen=TAIL_LINES))

    def add(self, stream: str, text: str) -> Batch | None:
        """Take one line; return a batch when this line filled one (send it now), else None."""
        index = STREAMS.index(stream) if stream in STREAMS else 1
        self.counts[index] += 1
        line = (STREAMS[index], self.counts[index], text)
        size = len(text) + 1
        if not self.capped and (self.live_lines >= LIVE_LINES or self.live_bytes + size > LIVE_BYTES):
            self.capped = True
        if self.capped:
            if len(self._tail) == self._tail.maxlen:
                self.skipped += 1  # the oldest line of the tail falls out: never sent live
            self._tail.append(line)
            return self.take() if self.pending or not self._cap_announced else None
        self.live_lines += 1
        self.live_bytes += size
        self.pending.append(line)
        self._pending_bytes += size
        if self._first_at is None:
            self._first_at = time.monotonic()
        if len(self.pending) >= BATCH_LINES or self._pending_bytes >= BATCH_BYTES:
            return self.take()
        return None

    def due(self, now: float | None = None) -> bool:
        """True when the oldest pending line has waited BATCH_S."""
        return self._first_at is not None and (now or time.monotonic()) - self._first_at >= BATCH_S

    def take(self) -> Batch | None:
        """Return the pending lines as a batch (None when there are none and nothing new to say)."""
        announce = self.capped and not self._cap_announced
        if not self.pending and not announce:
            return None
        batch = Batch(self.pending, self._upto(), capped=announce)
        self._cap_announced = self._cap_announced or announce
        self.pending, self._pending_bytes, self._first_at = [], 0, None
        return batch

    def close(self) -> list[Batch]:
        """The run ended: return what is left, the pending lines and then the tail of a capped stream."""
        batches = [b for b in [self.take()] if b is not None]
        if self._tail:
            batches.append(Batch(list(self._tail), (self.counts[0], self.counts[1]), skipped=self.skipped))
            self._tail.clear()
        return batches

    def _upto(self) -> tuple[int, int]:
        # a batch reaches as far as its own last line: lines still in the tail come later, in the closing batch
        if not self.capped:
            return (self.counts[0], self.counts[1])
        first_tail = {s: n for s, n, _ in reversed(self._tail)}
        return (first_tail.get("stdout", self.counts[0] + 1) - 1, first_tail.get("stderr", self.counts[1] + 1) - 1)


def stored_batches(stdout: str, stderr: str) -> list[Batch]:
    """Rebuild the batches of a finished run from its stored output (stdout's lines, then stderr's)."""
    batcher = OutputBatcher()
    batches = []
    for stream, text in (("stdout", stdout), ("stderr", stderr)):
        for line in (text or "").splitlines():
            if (batch := batcher.add(stream, line)) is not None:
                batches.append(batch)
    return batches + batcher.close()


__all__ = ["Batch", "OutputBatcher", "stored_batches", "position_id", "parse_position", "BATCH_S", "LIVE_LINES",
           "LIVE_BYTES", "TAIL_LINES"]
