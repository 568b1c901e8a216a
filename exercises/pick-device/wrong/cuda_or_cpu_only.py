# expect: uses_mps
import torch


def pick_device() -> torch.device:
    """The classic one-liner: forgets Apple's GPUs."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")
