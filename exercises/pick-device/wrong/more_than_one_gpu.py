# expect: prefers_cuda
import torch


def pick_device() -> torch.device:
    """Off by one: a machine with exactly one GPU has device_count() == 1."""
    if torch.cuda.device_count() > 1:
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")
