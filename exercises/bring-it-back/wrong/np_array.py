# expect: moved_to_host
import numpy as np
import torch


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """NumPy's own converter calls Tensor.numpy() under the hood."""
    return np.array(t)
