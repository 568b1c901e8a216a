# expect: moved_to_host
import numpy as np
import torch


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """Detached, but still on the GPU."""
    return t.detach().numpy()
