"""Runs inside the sandbox: call pick_device() under each availability scenario and report what it returned."""

SCENARIOS = [("cuda_and_mps", True, True), ("cuda_only", True, False), ("mps_only", False, True),
             ("none", False, False)]


def probe(ns, api):
    import torch

    fn = ns.get("pick_device")
    if not callable(fn):
        return {"defined": False}
    facts = {"defined": True, "line": getattr(getattr(fn, "__code__", None), "co_firstlineno", None), "results": {}}
    for name, cuda, mps in SCENARIOS:
        with api.scenario(cuda=cuda, mps=mps):
            value, error = api.call(fn)
        fact = {"cuda": cuda, "mps": mps, "error": error, "type": type(value).__name__, "repr": repr(value)[:80],
                "is_device": isinstance(value, torch.device), "device_type": None}
        try:
            fact["device_type"] = torch.device(value).type if value is not None else None
        except Exception:  # a value that is no device name at all
            pass
        facts["results"][name] = fact
    return facts
