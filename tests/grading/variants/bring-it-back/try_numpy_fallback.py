import numpy as np
import torch


def to_numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach()
    try:
        return t.numpy()  # a host tensor: no copy at all
    except TypeError:  # "can't convert cuda:0 device type tensor to numpy"
        return t.cpu().numpy()
