# expect: returns_numpy
import numpy as np
import torch


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """Flattened on the way: the shape is lost."""
    return t.detach().cpu().numpy().ravel()
