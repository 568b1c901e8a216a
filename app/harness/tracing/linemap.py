"""The placement map's facts: per line of the learner's file, what happened to tensors there.

Five kinds of event, counted per (line, event, device) for the whole run (a training loop repeats them
thousands of times, so they are summed here, not kept one by one like the tracer's other facts):

* `to_device`: a tensor (or a module's parameters) was copied onto an accelerator;
* `to_host`: a tensor was copied from an accelerator back to the host;
* `sync`: the host waited for the accelerator to read a value (`.item()`, `.tolist()`, printing a device tensor,
  `bool(t)` in an `if`);
* `mismatch`: tensors on two devices met in one operation (the line raised, or would on a real GPU);
* `created_on_device`: a tensor was made on an accelerator (`torch.zeros(..., device=device)`).

Each entry keeps up to NAMES_KEPT of the learner's variable names, the first shape, the ops, and the bytes
copied. The grader (app/grading/placement_map.py) turns them into the Verdict's `placement`.
"""

from __future__ import annotations

# distinct (line, event, device) entries kept; a program with more lines than this doing placement is rare
ENTRIES_KEPT = 400
NAMES_KEPT = 3
OPS_KEPT = 3
EVENTS = ("to_device", "to_host", "sync", "mismatch", "created_on_device")
# how a learner would call the op that synced: print(t) runs __repr__ or __format__
OP_WORDS = {"__repr__": "print", "__format__": "print", "__bool__": "bool", "__float__": "float",
            "__int__": "int", "__index__": "int", "__array__": "numpy"}


class LineMap:
    """Counts placement events per learner line."""

    def __init__(self) -> None:
        self.entries: dict[tuple[int, str, str], dict] = {}

    def note(self, line: int | None, event: str, device: str, *, names=(), shape=None, nbytes: int = 0,
             op: str | None = None, module: str | None = None) -> None:
        """Count one event at a learner line."""
        if line is None:
            return
        key = (line, event, device)
        entry = self.entries.get(key)
        if entry is None:
            if len(self.entries) >= ENTRIES_KEPT:
                return
            entry = self.entries[key] = {"line": line, "event": event, "device": device, "names": [], "count": 0,
                                         "bytes": 0, "shape": None, "ops": []}
            if module:
                entry["module"] = module
        entry["count"] += 1
        entry["bytes"] += int(nbytes)
        for name in names:
            if name not in entry["names"] and len(entry["names"]) < NAMES_KEPT:
                entry["names"].append(name)
        if entry["shape"] is None and shape is not None:
            entry["shape"] = list(shape)
        word = OP_WORDS.get(op, op)
        if word and word not in entry["ops"] and len(entry["ops"]) < OPS_KEPT:
            entry["ops"].append(word)

    def report(self) -> list[dict]:
        """The entries, by line."""
        return sorted(self.entries.values(), key=lambda e: (e["line"], EVENTS.index(e["event"])))


__all__ = ["LineMap", "EVENTS"]
