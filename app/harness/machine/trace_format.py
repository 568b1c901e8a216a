"""The modeled timeline as data, and the same as a Chrome trace: plain Python, no torch.

The clock (clock.py) records each piece of modeled work as (row, name, start s, duration s, line, kind). Here it
becomes what a verdict carries (`drawing`: the rows with their totals and the events, compact) and a Chrome trace
(`chrome_trace`: chrome://tracing, ui.perfetto.dev). `course run --trace` writes the trace of a run; the site
builds the same trace from a stored verdict (GET /api/submissions/{id}/trace), so both come from one function.

Kinds: "kernel" (a kernel on a stream), "copy" (on a copy engine's row), "sync" (the host waiting for the GPU, a
span on the host's row), "sync_mark" (the instant the host synchronised) and "mark" (an Event recorded on a
stream), the last two instants with no duration.
"""

from __future__ import annotations

SPANS = frozenset({"kernel", "copy", "sync"})
INSTANTS = frozenset({"sync_mark", "mark"})


def drawing(trace: list[tuple], limit: int) -> dict:
    """The timeline's rows (the host, then per device its streams and its copy engine) with each one's
    total span time, spans and instants, and its first `limit` events as compact lists:
    [row index, start us, duration us, kind, name, learner line or None]."""
    rows: dict[str, int] = {"host": 0}
    totals: list[list] = [[0.0, 0, 0]]  # per row: span seconds, spans, instants
    events: list[list] = []
    for row, name, start, duration, line, kind in trace:
        index = rows.get(row)
        if index is None:
            index = rows[row] = len(rows)
            totals.append([0.0, 0, 0])
        if kind in INSTANTS:
            totals[index][2] += 1
        else:
            totals[index][0] += duration
            totals[index][1] += 1
        if len(events) < limit:
            events.append([index, round(start * 1e6, 3), round(duration * 1e6, 3), kind, name, line])
    # the host first, then each device's streams (as they first appear) and its copy engine under them
    order = sorted(rows.items(), key=lambda item: (item[1] > 0, item[0].split(" ")[0], "copy engine" in item[0],
                                                   item[1]))
    new_index = {old: new for new, (_name, old) in enumerate(order)}
    for event in events:
        event[0] = new_index[event[0]]
    return {"rows": [{"name": name, "ms": round(totals[i][0] * 1e3, 4), "spans": totals[i][1],
                      "marks": totals[i][2]} for name, i in order],
            "events": events, "events_total": len(trace)}


def chrome_trace(timeline: dict) -> dict:
    """A timeline as `drawing` gives it (with the clock's summary beside it: machine, modeled_ms, ...) as a Chrome
    trace: one thread per row, spans as complete events ("X"), instants as thread-scoped instant events ("i"),
    each with its learner line in args."""
    rows = [r["name"] for r in timeline.get("rows") or [{"name": "host"}]]
    machine = timeline.get("machine") or "simulated GPU"
    meta = [{"name": "process_name", "ph": "M", "pid": 0, "args": {"name": f"modeled for {machine}"}}]
    meta += [{"name": "thread_name", "ph": "M", "pid": 0, "tid": tid, "args": {"name": row}}
             for tid, row in enumerate(rows)]
    meta += [{"name": "thread_sort_index", "ph": "M", "pid": 0, "tid": tid, "args": {"sort_index": tid}}
             for tid in range(len(rows))]
    events = []
    for tid, start, duration, kind, name, line in timeline.get("events") or []:
        args = {"line": line} if line is not None else {}
        if kind in INSTANTS:
            events.append({"name": name, "ph": "i", "s": "t", "pid": 0, "tid": tid, "ts": start, "cat": kind,
                           "args": args})
        else:
            events.append({"name": name, "ph": "X", "pid": 0, "tid": tid, "ts": start, "dur": duration,
                           "cat": kind, "args": args})
    summary = {k: v for k, v in timeline.items() if k not in ("rows", "events", "events_total")}
    return {"traceEvents": meta + events, "displayTimeUnit": "ms",
            "otherData": {"machine": machine, "modeled": True, "timeline": summary, "events_kept": len(events),
                          "events_total": timeline.get("events_total", len(events))}}
