"""Decide pick-device's checks from the probe's four calls (runs outside the sandbox)."""

from app.grading.facts import Facts, at, check, first_line

SETTING = {"cuda_and_mps": "CUDA and MPS both available", "cuda_only": "only CUDA available",
           "mps_only": "only MPS available", "none": "no accelerator at all"}


def evaluate(facts: Facts):
    """Return the checks of pick-device, in the order of exercise.yaml."""
    probe = facts.probe
    if not probe.get("defined"):
        exc = facts.outcome.get("exception")
        why = (f"{at(exc.get('line'))}{exc['type']}: {first_line(exc['message'])} stopped the file before "
               "`pick_device` was defined." if exc else "there is no function `pick_device()` in your file.")
        return [check(i, False, why, exc.get("line") if exc else None)
                for i in ("returns_device", "prefers_cuda", "uses_mps", "falls_back_to_cpu")]
    results, line = probe["results"], probe.get("line")
    return [_returns_device(results, line),
            _expect(results, ("cuda_and_mps", "cuda_only"), "cuda", "prefers_cuda", line,
                    "check `torch.cuda.is_available()` first and return `torch.device(\"cuda\")` when it is True"),
            _expect(results, ("mps_only",), "mps", "uses_mps", line,
                    "when CUDA is missing, ask `torch.backends.mps.is_available()` and return "
                    "`torch.device(\"mps\")`"),
            _expect(results, ("none",), "cpu", "falls_back_to_cpu", line,
                    "when neither is available, return `torch.device(\"cpu\")`")]


def _returns_device(results, line):
    for name, r in results.items():
        if r["error"]:
            continue
        if not r["is_device"] and r["repr"] == "None":
            return check("returns_device", False, f"with {SETTING[name]}, `pick_device()` returned None, not a "
                                                  "`torch.device`; every path must return one, the last "
                                                  "`torch.device(\"cpu\")`.", line)
        if not r["is_device"]:
            return check("returns_device", False,
                         f"with {SETTING[name]}, `pick_device()` returned {r['repr']} (a {r['type']}), not a "
                         "`torch.device`; wrap the name: `return torch.device(\"cuda\")`.", line)
    if all(r["error"] for r in results.values()):
        return check("returns_device", False, "`pick_device()` raised an exception in every setting; "
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
            return check(check_id, False, f"with {SETTING[name]}, `pick_device()` returned {r['repr']}; "
                                          f"{fix}.", line)
    return check(check_id, True)
