"""Runs inside the sandbox after the learner's file: report where `device`, `weights`, `x` and `y` ended up."""


def probe(ns, api):
    import torch

    def describe(name):
        value = ns.get(name)
        if isinstance(value, torch.Tensor):
            return {"kind": "tensor", "device": api.device_of(value), "shape": list(value.shape)}
        return {"kind": type(value).__name__ if name in ns else "missing", "repr": repr(value)[:80]}

    facts = {name: describe(name) for name in ("weights", "x", "y")}
    device = ns.get("device")
    facts["device"] = {"kind": type(device).__name__ if "device" in ns else "missing", "value": str(device)}
    weights, x, y = ns.get("weights"), ns.get("x"), ns.get("y")
    if all(isinstance(t, torch.Tensor) for t in (weights, x, y)):
        try:
            expected = api.host_copy(weights) @ api.host_copy(x)
            facts["y_matches"] = bool(expected.shape == api.host_copy(y).shape
                                      and torch.allclose(expected, api.host_copy(y), atol=1e-5))
        except Exception as exc:  # shapes the learner changed so that @ no longer works
            facts["y_matches"] = False
            facts["y_error"] = str(exc)[:200]
    return facts
