"""Advice: what the verdict says about a program that passes (or fails) but pays for something it need not.

Checks decide pass or fail; advice decides nothing. It names a line that costs time on a real GPU, how often it
ran, and what to write instead. Today that is a sync inside a loop: `.item()` or `print(loss)` on every step
makes the host wait for the GPU each time, so it cannot queue the next step while the GPU works. The lessons
say to log rarely; the verdict says it where the learner did it.
"""

from __future__ import annotations

from pydantic import BaseModel

from app.grading.placement_map import PlacementEntry
from app.grading.source import syncs_in_loops

# a sync line run fewer times than this is logging once per epoch, not per step: no advice
SYNCS_WORTH_ADVICE = 10
# lines of output past which a timed-out program's printing is named as the likely cost
LINES_WORTH_NAMING = 1000


class Advice(BaseModel):
    """One piece of advice: the line it is about and what to change there."""

    line: int | None = None
    message: str


def _how(e: PlacementEntry) -> str:
    var = e.names[0] if e.names else "loss"
    hows = [f"print({var})" if op in ("print", "__repr__", "__format__") else f"{var}.{op}()" for op in e.ops]
    return " and ".join(f"`{h}`" for h in dict.fromkeys(hows)) or "reading a device tensor"


def _modeled_cost(line: int | None, timeline: dict | None) -> str:
    """" On the simulated H100 the host waited 12.3 ms there (40% of the modeled run)." or ""."""
    if not timeline or line is None:
        return ""
    wait = sum(e.get("wait_ms", 0.0) for e in timeline.get("lines", []) if e.get("line") == line)
    total = timeline.get("modeled_ms") or 0.0
    if wait <= 0 or total <= 0:
        return ""
    machine = (timeline.get("machine") or "simulated GPU").upper()
    return (f" On the simulated {machine} (modeled time) the host waited {wait:.2f} ms there in all, "
            f"{100 * wait / total:.0f}% of the run's {total:.2f} ms.")


def sync_advice(placement: list[PlacementEntry], steps: int, timeline: dict | None = None) -> list[Advice]:
    """Advice for each line that made the host wait for the device on (nearly) every step of a loop, with the
    waiting's modeled cost where the run had a simulated clock."""
    out = []
    for e in placement:
        if e.event != "sync" or not e.in_loop or e.count < SYNCS_WORTH_ADVICE or (steps and e.count < steps):
            continue
        out.append(Advice(line=e.line, message=(
            f"line {e.line}: {_how(e)} ran {e.count} times inside the loop, and each is a sync: the host stops "
            f"until {e.device} has finished all the work queued before it, so it cannot queue the next step "
            "meanwhile. On a real GPU that waiting is often the loop's main cost."
            f"{_modeled_cost(e.line, timeline)} Read the value every 100 steps, or once per epoch; the checks do "
            "not need more.")))
    return out


def timeout_hint(code: str | None, stdout: str, otherwise: str = "Look for a loop that never ends, or train for "
                                                                 "fewer steps.") -> str:
    """The sentence a verdict stopped by a limit (time or output) ends with: the syncs in a loop when there are
    some (printing a GPU tensor on every step hits whichever limit comes first), else `otherwise`."""
    printed = stdout.count("\n")
    syncs = syncs_in_loops(code)
    if syncs:
        line, how = syncs[0]
        lines = f" (it printed {printed:,} lines)" if printed >= LINES_WORTH_NAMING else ""
        return (f"Line {line} calls {how} inside a loop{lines}: reading or printing a GPU tensor is a sync, the "
                "host waits for the GPU every time, and that many syncs are the cost here. Read or print once, "
                "after the loop (or every few hundred steps), and run fewer steps.")
    return otherwise


__all__ = ["Advice", "sync_advice", "timeout_hint"]
