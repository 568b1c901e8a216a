"""The launcher's words: the one report of a job of several ranks, and torchrun's summary of a failure.

The grader reads one report per job (app/grading/). For several ranks it is the ranks' reports side by side under
`ranks` (each with the rank's exit code or signal, and whether the launcher stopped it), plus, at the top, what
every exercise's checks already read: the outcome (of the rank that failed first, else rank 0), its trace, the
device line, the probe (rank 0's) and the nonce, which only the launcher held.
"""

from __future__ import annotations

import json
import os
import signal

from app.sandbox.harness.grade import REPORT_BUDGET

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


def merge(payload: dict, ranks: list, root, nonce: str | None) -> dict:
    """The job's report: every rank's facts, and at the top the lead rank's (the first failure's, or rank 0's)."""
    entries = []
    for rank in ranks:
        exit_code, sig = _fate(rank.status)
        entry = dict(rank.report or {})
        entry.update(rank=rank.index, world_size=len(ranks), reported=rank.report is not None,
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
            "launch": {"nproc": len(ranks), "first_failure": root.index if root is not None else None}}


def device_line(entries: list[dict]) -> str:
    """"cuda:0, cuda:1 (2 ranks, simulated on CPU)": each rank's GPU, and how the job had them."""
    reported = [e for e in entries if e["reported"]]
    if not reported:
        return f"{len(entries)} ranks"
    if reported[0].get("simulated"):
        kind = str(reported[0].get("accelerator") or "cuda").split(":")[0]
        devices = ", ".join(f"{kind}:{e['rank']}" for e in entries)  # rank r's GPU, whether it reported or not
        return f"{devices} ({len(entries)} ranks, simulated on CPU)"
    return ", ".join(str(e.get("device")) for e in reported) + f" ({len(entries)} ranks)"


def write(fd: int, report: dict) -> None:
    """Write the job's report to its pipe and close it (past the server's limit, the ranks' traces are cut)."""
    data = json.dumps(report, default=str).encode()
    if len(data) > REPORT_BUDGET:
        for entry in [report, *report["ranks"]]:
            trace = entry.get("trace") or {}
            trace["events"] = {k: v[:20] for k, v in (trace.get("events") or {}).items()}
        data = json.dumps(report, default=str).encode()
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view):]
        os.close(fd)
    except OSError:
        pass


def failure_summary(filename: str, root, ranks: list) -> bytes:
    """torchrun's account of a failed group (its ChildFailedError), without the time and host it adds."""
    failed = [r for r in ranks if r.status is not None and r.status != 0]
    blocks = {r.index: _failure(i, r, r is root) for i, r in enumerate(failed)}
    others = [blocks[r.index] for r in failed if r is not root] or ["  <NO_OTHER_FAILURES>"]
    lines = ["", "=" * WIDTH, f"{filename} FAILED", "-" * WIDTH, "Failures:", *others, "-" * WIDTH,
             "Root Cause (first observed failure):", blocks[root.index], "=" * WIDTH]
    return ("\n".join(lines) + "\n").encode()


def _failure(index: int, rank, root: bool) -> str:
    exit_code, sig = _fate(rank.status)
    code = exit_code if sig is None else -sig
    name = f" ({signal.Signals(sig).name})" if sig is not None else ""
    if root:
        why = "shown first, above" if rank.traceback else "none (the rank printed no traceback)"
    elif rank.stopped and sig in (signal.SIGTERM, signal.SIGKILL):
        why = "none: stopped by the launcher, as torchrun stops the other ranks"
    else:
        why = "above" if rank.traceback else "none (the rank printed no traceback)"
    return (f"[{index}]:\n  rank      : {rank.index} (local_rank: {rank.index})\n"
            f"  exitcode  : {code} (pid: {rank.pid}){name}\n  traceback : {why}")
