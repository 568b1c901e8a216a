"""The one Chrome trace writer of the simulated GPU (chrome://tracing, ui.perfetto.dev).

Three callers: `course run --trace` (the run's whole modeled timeline, `timeline`), torch.profiler's
`export_chrome_trace` on a simulated GPU (machine/profiler.py: the profiled window's host ops and device work), and
the site's download of a graded run (GET /api/submissions/{id}/trace: `of_timeline`, from the events the verdict
carries, which `drawing` makes). All draw the same rows: one for the host, one per GPU stream and copy engine,
named as the clock names them. Plain Python, no torch: the web process builds the download.
"""

from __future__ import annotations

# an entry: (row, name, start s, duration s, learner line or None, kind[, args]); kind is the event's category
# ("kernel", "copy", "sync", ...); the marks ("sync_mark", "mark") are instants, everything else a span
INSTANTS = frozenset({"sync_mark", "mark"})


def chrome_trace(entries, *, machine: str | None, other: dict | None = None, order: list[str] | None = None) -> dict:
    """The entries as a Chrome trace: one row per distinct row name, the host's first, in order of appearance
    (`order`: these rows first, in this order)."""
    rows: dict[str, int] = {name: tid for tid, name in enumerate(order or ["host"])}
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


def drawing(entries, limit: int) -> dict:
    """What a verdict carries for the page to draw: the rows (the host, then per device its streams and its copy
    engine) with each one's total span time (`ms`), `spans` and instants (`marks`), and the first `limit` entries
    as compact lists [row index, start us, duration us, kind, name, learner line or None]."""
    rows: dict[str, int] = {"host": 0}
    totals: list[list] = [[0.0, 0, 0]]  # per row: span seconds, spans, instants
    events: list[list] = []
    for row, name, start, duration, line, kind, *_extra in entries:
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
            "events": events, "events_total": len(entries)}


def of_timeline(timeline: dict) -> dict:
    """A verdict's `timeline` (its figures, and the rows and events `drawing` made) as the Chrome trace of that run,
    its rows in the verdict's order."""
    names = [r["name"] for r in timeline.get("rows") or []]
    entries = [(names[row], name, start / 1e6, duration / 1e6, line, kind)
               for row, start, duration, kind, name, line in timeline.get("events") or []]
    summary = {k: v for k, v in timeline.items() if k not in ("rows", "events", "events_total")}
    return chrome_trace(entries, machine=timeline.get("machine"), order=names or None,
                        other={"timeline": summary, "events_kept": len(entries),
                               "events_total": timeline.get("events_total", len(entries))})
