"""Decide pick-device's checks from the probe's five calls (runs outside the sandbox)."""

from app.grading.facts import Facts, at, check, first_line

SETTING = {"cuda_gpu": "a CUDA build of torch and one NVIDIA GPU",
           "mac_mps": "the macOS (Apple silicon) build of torch with its GPU usable",
           "cpu_build": "a CPU-only build of torch",
           "cuda_no_gpu": "a CUDA build of torch on a machine without an NVIDIA GPU",
           "mac_no_mps": "the macOS build of torch where MPS is unusable (a virtual machine, an old macOS)"}
IDS = ("returns_device", "prefers_cuda", "uses_mps", "falls_back_to_cpu")
# why a machine without an accelerator still got one back, by what the function returned there
NOT_THERE = {
    ("cuda_no_gpu", "cuda"): "`torch.accelerator.current_accelerator()` names the accelerator torch was *built* for, "
                             "here CUDA, even with no GPU in the machine; ask `torch.cuda.is_available()` (or "
                             "`current_accelerator(check_available=True)`)",
    ("mac_no_mps", "mps"): "`torch.backends.mps.is_built()` (and `current_accelerator()`) only say that this build "
                           "knows MPS; ask `torch.backends.mps.is_available()` whether this Mac can use it",
}


def evaluate(facts: Facts):
    """Return the checks of pick-device, in the order of exercise.yaml."""
    probe = facts.probe
    if not probe.get("defined"):
        exc = facts.outcome.get("exception")
        if exc:  # the first check explains the exception; the others were never reached
            return [check("returns_device", False, f"{at(exc.get('line'))}{exc['type']}: {first_line(exc['message'])} "
                          "stopped the file before `pick_device` was defined.", exc.get("line"))] + \
                [check(i, False, "`pick_device` was never defined.") for i in IDS[1:]]
        return [check(i, False, "there is no function `pick_device()` in your file.") for i in IDS]
    results, line = probe["results"], probe.get("line")
    return [_returns_device(results, line),
            _expect(results, ("cuda_gpu",), "cuda", "prefers_cuda", line,
                    "check `torch.cuda.is_available()` first and return `torch.device(\"cuda\")` when it is True"),
            _expect(results, ("mac_mps",), "mps", "uses_mps", line,
                    "when CUDA is missing, ask `torch.backends.mps.is_available()` and return "
                    "`torch.device(\"mps\")`"),
            _expect(results, ("cpu_build", "cuda_no_gpu", "mac_no_mps"), "cpu", "falls_back_to_cpu", line,
                    "when no accelerator is usable, return `torch.device(\"cpu\")`")]


def _returned_at(r: dict, line):
    """The learner's line that returned this result (the wrong `return`), else the function's first line."""
    return r.get("return_line") or line


def _returned(r: dict, line) -> str:
    """The cause key of a wrong result: the same value from the same `return` is one mistake, on any machine."""
    return f"returned:{line}:{r['repr']}"


def _returns_device(results, line):
    for name, r in results.items():
        if r["error"]:
            continue
        at_return = _returned_at(r, line)
        if not r["is_device"] and r["repr"] == "None":
            return check("returns_device", False, f"{at(at_return)}with {SETTING[name]}, `pick_device()` ended here "
                                                  "and returned None, not a `torch.device`; every path must return "
                                                  "one, the last `torch.device(\"cpu\")`.", at_return,
                         cause=_returned(r, at_return))
        if not r["is_device"]:
            return check("returns_device", False,
                         f"{at(at_return)}with {SETTING[name]}, `pick_device()` returned {r['repr']} (a "
                         f"{r['type']}), not a `torch.device`; wrap the name: `return torch.device(\"cuda\")`.",
                         at_return, cause=_returned(r, at_return))
    if all(r["error"] for r in results.values()):
        return check("returns_device", False, "`pick_device()` raised an exception on every machine; "
                                              "see the other checks.", line)
    return check("returns_device", True)


def _expect(results, names, wanted, check_id, line, fix):
    for name in names:
        r = results[name]
        if r["error"]:
            err = r["error"]
            return check(check_id, False, f"with {SETTING[name]}, {at(err.get('line'))}`pick_device()` raised "
                                          f"{err['type']}: {first_line(err['message'])}; {fix}.",
                         err.get("line") or line)
        if r["device_type"] != wanted:
            why = NOT_THERE.get((name, r["device_type"]), fix)
            at_return = _returned_at(r, line)
            return check(check_id, False, f"{at(at_return)}with {SETTING[name]}, `pick_device()` returned "
                                          f"{r['repr']}; {why}.", at_return, cause=_returned(r, at_return))
    return check(check_id, True)
