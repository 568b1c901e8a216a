# expect: returns_numpy
import numpy as np
import torch


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A host tensor is still a tensor, not an ndarray."""
    return t.detach().cpu()
