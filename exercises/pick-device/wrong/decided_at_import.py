# expect: falls_back_to_cpu
import torch

# Decided once, when the file is loaded, instead of asking each time the function is called.
BEST = torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")


def pick_device() -> torch.device:
    return BEST
