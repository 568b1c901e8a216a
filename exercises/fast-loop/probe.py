"""Runs inside the sandbox after the script: the model's shape, and where its parameters are."""


def probe(ns, api):
    import torch

    models = {}
    for name, value in list(ns.items()):
        if isinstance(value, torch.nn.Module) and any(True for _ in value.parameters()):
            models[name] = {"shapes": [list(p.shape) for p in value.parameters()],
                            "devices": sorted({api.device_of(p) for p in value.parameters()})}
    return {"models": models}
