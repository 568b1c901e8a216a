"""The launcher's words: the one report of a job of several ranks, and torchrun's summary of a failure.

The grader reads one report per job (app/grading/). For several ranks it is the ranks' reports side by side under
`ranks` (each with the rank's exit code or signal, and whether the launcher stopped it), plus, at the top, what
every exercise's checks already read: the outcome (of the rank that failed first, else rank 0), its trace, the
device line, the probe (rank 0's) and the nonce, which only the launcher held.
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import socket
import time

from app.harness.contract import JobPayload, Report
from app.harness.grade import REPORT_BUDGET, VERDICT_EVENTS

WIDTH = 60


def parse_message(line: bytes) -> dict:
    """One JSON line from a rank's channel; {} for anything else (the learner's code can write there too)."""
    try:
        message = json.loads(line)
    except ValueError:
        return {}
    return message if isinstance(message, dict) else {}


def _fate(status: int | None) -> tuple[int | None, int | None]:
    """(exit code, signal) of a wait status."""
    if status is None:
        return None, None
    code = os.waitstatus_to_exitcode(status)
    return (None, -code) if code < 0 else (code, None)


def merge(payload: JobPayload, ranks: list, root, nonce: str | None) -> Report:
    """The job's report: every rank's facts, and at the top the lead rank's (the first failure's, or rank 0's)."""
    entries = []
    for rank in ranks:
        exit_code, sig = _fate(rank.status)
        entry = dict(rank.report or {})
        entry.update(rank=rank.index, local_rank=rank.local, node=rank.node, world_size=len(ranks),
                     reported=rank.report is not None,
                     exit_code=exit_code, signal=sig, stopped=rank.stopped)
        entries.append(entry)
    lead = entries[root.index if root is not None else 0]
    reported = [e for e in entries if e["reported"]]
    base = reported[0] if reported else {}
    outcome = lead.get("outcome") or {"finished": False, "exception": None, "exit_code": lead["exit_code"],
                                      "signal": lead["signal"]}
    return {"nonce": nonce, "exercise": (payload.get("grade") or {}).get("exercise"),
            "simulated": base.get("simulated"), "device": device_line(entries), "accelerator": base.get("accelerator"),
            "host": payload.get("host"), "outcome": outcome, "probe": entries[0].get("probe"),
            "probe_error": next((e["probe_error"] for e in entries if e.get("probe_error")), None),
            "tampered": sorted({t for e in entries for t in e.get("tampered") or ()}),
            "trace": lead.get("trace") or {}, "dist": lead.get("dist"), "ranks": entries,
            "timeline": merge_timelines(entries),
            "launch": {"nproc": len(ranks), "first_failure": root.index if root is not None else None}}


# a rank's totals kept in the job's timeline (contract.RankTimeline)
RANK_FIGURES = ("modeled_ms", "gpu_busy_ms", "copy_ms", "comm_ms", "host_wait_ms", "gpu_idle_ms", "syncs",
                "kernels", "collectives", "step_ms")


def merge_timelines(entries: list[dict]) -> dict | None:
    """The job's modeled timeline: the first reporting rank's figures and lines (rank 0's, whose lines the advice
    names), the job's modeled time (the latest rank's end), every rank's totals under `ranks`, and the rows to draw
    of every rank, each named after its rank ("rank 1 cuda:1 nccl"), with their first events (VERDICT_EVENTS in
    all). The ranks' own copies of rows and events are dropped: the job's timeline holds them."""
    timelines = [(e, e["timeline"]) for e in entries if isinstance(e.get("timeline"), dict)]
    if not timelines:
        return None
    ranks = [{"rank": e["rank"], "node": e.get("node"), **{k: t.get(k) for k in RANK_FIGURES if k in t}}
             for e, t in timelines]
    merged = {**timelines[0][1], "modeled_ms": max(t.get("modeled_ms") or 0.0 for _, t in timelines),
              "ranks": ranks}
    if any("rows" in t for _, t in timelines):
        rows, events, share = [], [], max(1, VERDICT_EVENTS // len(timelines))
        for e, t in timelines:
            name = f"rank {e['rank']}" + ("" if e.get("node") is None else f" (node{e['node']})")
            offset = len(rows)
            rows += [{**r, "name": f"{name} {r['name']}"} for r in t.get("rows") or []]
            events += [[event[0] + offset, *event[1:]] for event in (t.get("events") or [])[:share]]
            for key in ("rows", "events"):
                t.pop(key, None)
        merged.update(rows=rows, events=events,
                      events_total=sum(t.get("events_total") or 0 for _, t in timelines))
    return merged


def merge_traces(ranks: list) -> dict | None:
    """`course run --trace` of several ranks: every rank's Chrome trace in one, a process (pid) per rank."""
    traces = [(r, r.chrome_trace) for r in ranks if isinstance(getattr(r, "chrome_trace", None), dict)]
    if not traces:
        return None
    events: list[dict] = []
    for rank, trace in traces:
        for event in trace.get("traceEvents", []):
            event = {**event, "pid": rank.index}
            if event.get("name") == "process_name":
                where = "" if rank.node is None else f" on node{rank.node}"
                event["args"] = {"name": f"rank {rank.index}{where}: {event.get('args', {}).get('name', '')}"}
            events.append(event)
        events.append({"name": "process_sort_index", "ph": "M", "pid": rank.index,
                       "args": {"sort_index": rank.index}})
    first = traces[0][1].get("otherData", {})
    entries = [{"rank": r.index, "node": r.node, "timeline": t.get("otherData", {}).get("timeline")}
               for r, t in traces]
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"machine": first.get("machine"), "modeled": True, "ranks": len(traces),
                          "timeline": merge_timelines(entries),
                          "events_kept": sum(t.get("otherData", {}).get("events_kept", 0) for _, t in traces)}}


def device_line(entries: list[dict]) -> str:
    """"cuda:0, cuda:1 (2 ranks, simulated on CPU)": each rank's GPU, and how the job had them."""
    reported = [e for e in entries if e["reported"]]
    if not reported:
        return f"{len(entries)} ranks"
    if reported[0].get("simulated"):
        kind = str(reported[0].get("accelerator") or "cuda").split(":")[0]
        # rank r's GPU (cuda:LOCAL_RANK of its machine), whether it reported or not
        devices = ", ".join(("" if e.get("node") is None else f"node{e['node']} ")
                            + f"{kind}:{e.get('local_rank', e['rank'])}" for e in entries)
        nodes = {e.get("node") for e in entries} - {None}
        where = f"{len(entries)} ranks" + (f" on {len(nodes)} machines" if nodes else "")
        return f"{devices} ({where}, simulated on CPU)"
    return ", ".join(str(e.get("device")) for e in reported) + f" ({len(entries)} ranks)"


def write_plain(fd: int, value: dict) -> None:
    """Write one JSON document to the report pipe as it is and close it."""
    _send(fd, json.dumps(value, default=str).encode())


def write(fd: int, report: dict) -> None:
    """Write the job's report to its pipe and close it (past the server's limit, the ranks' traces are cut)."""
    data = json.dumps(report, default=str).encode()
    if len(data) > REPORT_BUDGET:
        for entry in [report, *report["ranks"]]:
            trace = entry.get("trace") or {}
            trace["events"] = {k: v[:20] for k, v in (trace.get("events") or {}).items()}
        data = json.dumps(report, default=str).encode()
    _send(fd, data)


def _send(fd: int, data: bytes) -> None:
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view):]
        os.close(fd)
    except OSError:
        pass


# torchrun's words (torch/distributed/elastic/multiprocessing/errors/__init__.py, torch 2.13): the exception its
# `torchrun` entry point ends with, and what a failure without an error file says (no @record on the script)
CHILD_FAILED = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: "
NO_ERROR_FILE = "<N/A>"
NO_TRACEBACK = "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"


def failure_summaries(filename: str, root, ranks: list) -> bytes:
    """What each machine's torchrun prints when its ranks failed: its ChildFailedError (every failed rank of that
    machine, those it stopped included; the first failure as the root cause). On several machines, each line
    starts with the machine's name, as the machine's output does."""
    machines: dict = {}
    for rank in ranks:
        if rank.status is not None and rank.status != 0:
            machines.setdefault(rank.node, []).append(rank)
    out = []
    for node, failed in sorted(machines.items(), key=lambda item: -1 if item[0] is None else item[0]):
        first = root if root in failed else min(failed, key=lambda r: (r.ended or 0.0, r.index))
        text = CHILD_FAILED + _child_failed(filename, first, failed)
        prefix = "" if node is None else f"node{node}: "
        out.append("".join(f"{prefix}{line}\n" for line in text.split("\n")))
    return "".join(out).encode()


def _child_failed(filename: str, root, failed: list) -> str:
    """ChildFailedError.format_msg: the failures in global rank order, the root cause apart, at most 60 wide."""
    title = f"{filename} FAILED"
    blocks = {r.index: _failure(i, r) for i, r in enumerate(failed)}
    width = min(max([len(title), *(len(line) for b in blocks.values() for line in b.split("\n"))]), WIDTH)
    others = [blocks[r.index] for r in failed if r is not root] or ["  <NO_OTHER_FAILURES>"]
    return "\n".join(["", "=" * width, title, "-" * width, "Failures:", *others, "-" * width,
                      "Root Cause (first observed failure):", blocks[root.index], "=" * width])


def _failure(index: int, rank) -> str:
    """One ProcessFailure as torchrun formats it (_FAILURE_FORMAT_TEMPLATE)."""
    exit_code, sig = _fate(rank.status)
    code = exit_code if sig is None else -sig
    name = f" ({signal.Signals(sig).name})" if sig is not None else ""
    message = f"Signal {sig}{name} received by PID {rank.pid}" if sig is not None else NO_TRACEBACK
    when = datetime.datetime.fromtimestamp(int(rank.ended or time.time())).isoformat(sep="_")
    host = socket.getfqdn() if rank.node is None else f"node{rank.node}"
    return (f"[{index}]:\n  time      : {when}\n  host      : {host}\n"
            f"  rank      : {rank.index} (local_rank: {rank.local})\n"
            f"  exitcode  : {code} (pid: {rank.pid}) {name}\n  error_file: {NO_ERROR_FILE}\n"
            f"  traceback : {message}")
