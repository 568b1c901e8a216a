import torch


def pick_device() -> torch.device:
    """MPS before CUDA: no torch build has both, so the order of the two questions does not matter."""
    if torch.backends.mps.is_available():
        return torch.device("mps")
    if torch.cuda.is_available():
        return torch.device("cuda")
    return torch.device("cpu")
