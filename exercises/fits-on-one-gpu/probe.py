"""Runs inside the sandbox after the learner's file: the learner's model's size and the card's memory figures."""

import torch


def probe(ns, api):
    """The largest nn.Module the learner's file left (its parameter count) and the simulated card's peak."""
    models = [v for k, v in ns.items() if isinstance(v, torch.nn.Module) and not k.startswith("__")]
    params = max((sum(p.numel() for p in m.parameters()) for m in models), default=None)
    out = {"params": params, "peak": None, "total": None}
    if torch.cuda.is_available():
        out["peak"] = torch.cuda.max_memory_allocated()
        out["total"] = torch.cuda.get_device_properties(0).total_memory
    return out
