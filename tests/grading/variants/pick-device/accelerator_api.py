import torch


def pick_device() -> torch.device:
    acc = torch.accelerator.current_accelerator(check_available=True)  # None unless it is usable here
    return acc if acc is not None else torch.device("cpu")
