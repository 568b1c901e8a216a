# expect: handles_grad
import numpy as np
import torch


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """Brought to the host, but still attached to the autograd graph."""
    return t.cpu().numpy()
