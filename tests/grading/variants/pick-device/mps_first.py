# expect: prefers_cuda
import torch


def pick_device() -> torch.device:
    """Checks MPS before CUDA."""
    if torch.backends.mps.is_available():
        return torch.device("mps")
    if torch.cuda.is_available():
        return torch.device("cuda")
    return torch.device("cpu")
