# expect: returns_device
import torch


def pick_device():
    """Return the best available device name."""
    if torch.cuda.is_available():
        return "cuda"
    if torch.backends.mps.is_available():
        return "mps"
    return "cpu"
