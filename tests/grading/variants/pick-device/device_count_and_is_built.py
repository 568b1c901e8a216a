import torch


def pick_device() -> torch.device:
    if torch.cuda.device_count() > 0:
        return torch.device("cuda:0")
    if torch.backends.mps.is_built() and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")
