# expect: returns_numpy
import numpy as np
import torch


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """Through Python numbers: the values survive, the float32 dtype does not."""
    return np.array(t.detach().cpu().tolist())
