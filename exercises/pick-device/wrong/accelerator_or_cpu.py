# expect: falls_back_to_cpu
import torch


def pick_device() -> torch.device:
    """current_accelerator() names the accelerator torch was built for, usable here or not."""
    return torch.accelerator.current_accelerator() or torch.device("cpu")
