"""Runs inside the sandbox: call pick_device() on five simulated machines and report what it returned.

Each machine is a torch build plus the devices it finds, as the harness simulates them (ProbeAPI.scenario):
the CUDA wheel knows CUDA even where no NVIDIA GPU is present, the macOS arm64 wheel knows MPS whatever the
hardware, the CPU-only wheel knows neither.
"""

# (name, torch build, CUDA GPUs, MPS usable)
SCENARIOS = [("cuda_gpu", "cuda", 1, False), ("mac_mps", "macos-arm64", 0, True), ("cpu_build", "cpu", 0, False),
             ("cuda_no_gpu", "cuda", 0, False), ("mac_no_mps", "macos-arm64", 0, False)]


def probe(ns, api):
    import torch

    fn = ns.get("pick_device")
    if not callable(fn):
        return {"defined": False}
    facts = {"defined": True, "line": getattr(getattr(fn, "__code__", None), "co_firstlineno", None), "results": {}}
    for name, build, gpus, mps in SCENARIOS:
        with api.scenario(build=build, gpus=gpus, mps=mps):
            value, error = api.call(fn)
        fact = {"build": build, "gpus": gpus, "mps": mps, "error": error, "type": type(value).__name__,
                "return_line": api.return_line,
                "repr": repr(value)[:80], "is_device": isinstance(value, torch.device), "device_type": None}
        try:
            fact["device_type"] = torch.device(value).type if value is not None else None
        except Exception:  # a value that is no device name at all
            pass
        facts["results"][name] = fact
    return facts
