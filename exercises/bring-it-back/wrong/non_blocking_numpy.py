# expect: moved_to_host
import numpy as np
import torch


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """"non_blocking is faster": the copy is still running when NumPy reads it."""
    return t.detach().to("cpu", non_blocking=True).numpy()
