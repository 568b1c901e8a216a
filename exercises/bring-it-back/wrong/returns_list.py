# expect: returns_numpy
import numpy as np
import torch


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A nested Python list, not an ndarray."""
    return t.tolist()
