"""The one Chrome trace writer of the simulated GPU (chrome://tracing, ui.perfetto.dev).

Two callers: `course run --trace` (the run's whole modeled timeline, `timeline`) and torch.profiler's
`export_chrome_trace` on a simulated GPU (machine/profiler.py: the profiled window's host ops and device work).
Both draw the same rows: one for the host, one per GPU stream and copy engine, named as the clock names them.
"""

from __future__ import annotations

# an entry: (row, name, start s, duration s, learner line or None, kind[, args]); kind is the event's category
# ("kernel", "copy", "sync", ...); the marks ("sync_mark", "mark") are instants, everything else a span
INSTANTS = frozenset({"sync_mark", "mark"})


def chrome_trace(entries, *, machine: str | None, other: dict | None = None) -> dict:
    """The entries as a Chrome trace: one row per distinct row name, the host's first, in order of appearance."""
    rows: dict[str, int] = {"host": 0}
    events: list[dict] = []
    for row, name, start, duration, line, kind, *extra in entries:
        tid = rows.setdefault(row, len(rows))
        args = dict(extra[0]) if extra and extra[0] else {}
        if line is not None:
            args["line"] = line
        event = {"name": name, "ph": "i" if kind in INSTANTS else "X", "pid": 0, "tid": tid,
                 "ts": round(start * 1e6, 3), "cat": kind, "args": args}
        if kind in INSTANTS:
            event["s"] = "t"
        else:
            event["dur"] = round(duration * 1e6, 3)
        events.append(event)
    machine = machine or "simulated GPU"
    meta = [{"name": "process_name", "ph": "M", "pid": 0, "args": {"name": f"modeled for {machine}"}}]
    meta += [{"name": "thread_name", "ph": "M", "pid": 0, "tid": tid, "args": {"name": row}}
             for row, tid in rows.items()]
    meta += [{"name": "thread_sort_index", "ph": "M", "pid": 0, "tid": tid, "args": {"sort_index": tid}}
             for tid in rows.values()]
    return {"traceEvents": meta + events, "displayTimeUnit": "ms",
            "otherData": {"machine": machine, "modeled": True, **(other or {})}}


def timeline(clock, limit: int | None = None) -> dict:
    """The run's whole timeline (`course run --trace`): kernels and copies as spans, the host's waits as spans and
    each sync as a marked instant."""
    kept = clock.trace if limit is None else clock.trace[:limit]
    return chrome_trace(kept, machine=(clock.figures or {}).get("machine"),
                        other={"timeline": clock.summary(), "events_kept": len(kept)})
