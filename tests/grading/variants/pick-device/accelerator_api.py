import torch


def pick_device() -> torch.device:
    acc = torch.accelerator.current_accelerator()
    return acc if acc is not None else torch.device("cpu")
