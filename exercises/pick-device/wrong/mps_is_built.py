# expect: falls_back_to_cpu
import torch


def pick_device() -> torch.device:
    """is_built() says the build knows MPS, not that this Mac can use it."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_built():
        return torch.device("mps")
    return torch.device("cpu")
