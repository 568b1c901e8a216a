"""Decide bring-it-back's checks from the probe's four calls (runs outside the sandbox)."""

from app.grading.facts import Facts, at, check, first_line

WHAT = {"host": "a host tensor", "host_grad": "a host tensor that requires grad",
        "accelerator": "a tensor on the GPU", "accelerator_grad": "a GPU tensor that requires grad"}
IDS = ("returns_numpy", "handles_grad", "moved_to_host")


def evaluate(facts: Facts):
    """Return the checks of bring-it-back, in the order of exercise.yaml."""
    probe = facts.probe
    if not probe.get("defined"):
        exc = facts.outcome.get("exception")
        if exc:  # the first check explains the exception; the others were never reached
            return [check("returns_numpy", False, f"{at(exc.get('line'))}{exc['type']}: {first_line(exc['message'])} "
                          "stopped the file before `to_numpy` was defined.", exc.get("line"))] + \
                [check(i, False, "`to_numpy` was never defined.") for i in IDS[1:]]
        return [check(i, False, "there is no function `to_numpy(t)` in your file.") for i in IDS]
    cases, line = probe["cases"], probe.get("line")
    return [_returns_numpy(cases, line), _handles_grad(cases, line), _moved_to_host(cases, line, facts)]


def _returns_numpy(cases, line):
    returned = {n: c for n, c in cases.items() if not c["error"]}
    if "host" not in returned:
        err = cases["host"]["error"]
        return check("returns_numpy", False, f"with {WHAT['host']}, {at(err.get('line'))}`to_numpy` raised "
                                             f"{err['type']}: {first_line(err['message'])}.", err.get("line") or line)
    for name, c in returned.items():
        if not c["is_ndarray"]:
            return check("returns_numpy", False, f"with {WHAT[name]}, `to_numpy` returned a {c['type']}, not a NumPy "
                                                 "array; finish with `.numpy()`.", line)
        if not c["values_ok"]:
            return check("returns_numpy", False, f"with {WHAT[name]} of shape [2, 3], `to_numpy` returned an array of "
                                                 f"shape {c['shape']} or different values; keep the values and the "
                                                 "shape as they are.", line)
        if c["dtype"] != c["expected_dtype"]:
            return check("returns_numpy", False, f"with {WHAT[name]} of {c['expected_dtype']} values, `to_numpy` "
                                                 f"returned an array of {c['dtype']}: a detour through Python "
                                                 "numbers (`.tolist()`) loses the tensor's dtype. Let `.numpy()` "
                                                 "convert it: `t.detach().cpu().numpy()`.", line)
    return check("returns_numpy", True)


def _handles_grad(cases, line):
    for name in ("host_grad", "accelerator_grad"):
        err = cases[name]["error"]
        if err and "requires grad" in err["message"]:
            return check("handles_grad", False,
                         f"{at(err.get('line'))}with {WHAT[name]}, NumPy refused: {first_line(err['message'])}. "
                         "Leave the autograd graph first: `t.detach()`.", err.get("line") or line)
    if cases["host_grad"]["error"]:
        err = cases["host_grad"]["error"]
        return check("handles_grad", False, f"with {WHAT['host_grad']}, {at(err.get('line'))}`to_numpy` raised "
                                            f"{err['type']}: {first_line(err['message'])}.", err.get("line") or line)
    if not cases["host_grad"]["is_ndarray"]:
        return check("handles_grad", False, f"with {WHAT['host_grad']}, `to_numpy` did not return a NumPy array.",
                     line)
    return check("handles_grad", True)


def _moved_to_host(cases, line, facts):
    for name in ("accelerator", "accelerator_grad"):
        c = cases[name]
        unsynced = next((r for r in c["host_reads"] if r.get("unsynced")), None)
        if unsynced:
            copy = next((m for m in c["moves_to_host"] if m.get("non_blocking")), {})
            return check("moved_to_host", False,
                         f"{at(unsynced.get('line'))}`.{unsynced['op'].strip('_')}()` read the host copy that "
                         f"`.{copy.get('op', 'to')}(\"cpu\", non_blocking=True)` was still making: a non-blocking copy "
                         "to the host returns before the data has arrived, so on a GPU this reads garbage. Drop "
                         "`non_blocking=True` here (or call `torch.cuda.synchronize()` before reading).",
                         unsynced.get("line") or line)
        if c["numpy_on_accelerator"] and not _brought_back(c):
            e = c["numpy_on_accelerator"][0]
            how = "`np.array(t)`/`np.asarray(t)`" if e.get("op") == "__array__" else "`.numpy()`"
            return check("moved_to_host", False,
                         f"{at(e.get('line'))}{how} was handed a tensor that lives on {e.get('device')}; NumPy "
                         "only reads host memory. Copy it to the host first: `t.detach().cpu().numpy()`.",
                         e.get("line") or line)
    c = cases["accelerator"]
    if not _brought_back(c):
        if c["error"]:
            err = c["error"]
            return check("moved_to_host", False, f"with {WHAT['accelerator']}, {at(err.get('line'))}`to_numpy` "
                                                 f"raised {err['type']}: {first_line(err['message'])}.",
                         err.get("line") or line)
        return check("moved_to_host", False, f"with {WHAT['accelerator']}, `to_numpy` never brought it to the "
                                             f"host ({facts.accelerator} -> cpu); use `.cpu()`, `.to(\"cpu\")` or "
                                             "`.numpy(force=True)`.", line)
    return check("moved_to_host", True)


def _brought_back(case) -> bool:
    """True when the call returned an array after copying the tensor to the host (a caught refusal is fine)."""
    moved = case["moves_to_host"] or any(r["op"] in ("tolist", "item") or r.get("force")
                                         for r in case["host_reads"])
    return moved and not case["error"]
