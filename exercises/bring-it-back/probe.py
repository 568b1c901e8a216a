"""Runs inside the sandbox: call to_numpy() with host/accelerator tensors, with and without grad."""

CASES = [("host", False, False), ("host_grad", False, True), ("accelerator", True, False),
         ("accelerator_grad", True, True)]


def probe(ns, api):
    import numpy as np
    import torch

    fn = ns.get("to_numpy")
    if not callable(fn):
        return {"defined": False}
    facts = {"defined": True, "line": getattr(getattr(fn, "__code__", None), "co_firstlineno", None), "cases": {}}
    for name, on_accel, grad in CASES:
        base = torch.arange(6, dtype=torch.float32).reshape(2, 3) + 0.5
        expected = base.clone().numpy()
        t = api.on_device(base) if on_accel else base
        if grad:
            leaf = t.detach().requires_grad_(True)
            if on_accel and api.simulated:
                leaf._pt_dev = api.accelerator
            t = leaf * 1.0  # a non-leaf with a grad_fn, like a model's output
        mark = api.mark()
        value, error = api.call(fn, t)
        fact = {"on_accelerator": on_accel, "grad": grad, "error": error, "type": type(value).__name__,
                "is_ndarray": isinstance(value, np.ndarray), "shape": None, "values_ok": False, "dtype": None,
                "expected_dtype": str(expected.dtype),
                "numpy_on_accelerator": api.events_since(mark, "numpy_on_accelerator"),
                "moves_to_host": [{k: e.get(k) for k in ("op", "line", "non_blocking")}
                                  for e in api.events_since(mark, "move") if e.get("dst_device") == "cpu"],
                "host_reads": [{k: e.get(k) for k in ("op", "line", "force", "device", "unsynced")}
                               for e in api.events_since(mark, "host_read")]}
        if isinstance(value, np.ndarray):
            fact["shape"], fact["dtype"] = list(value.shape), str(value.dtype)
            try:
                fact["values_ok"] = bool(value.shape == expected.shape and np.allclose(value, expected))
            except Exception:  # an array of objects, strings ...
                pass
        facts["cases"][name] = fact
    return facts
