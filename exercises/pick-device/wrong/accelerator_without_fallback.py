# expect: falls_back_to_cpu
import torch


def pick_device() -> torch.device:
    """current_accelerator() is None when there is no accelerator."""
    return torch.accelerator.current_accelerator()
