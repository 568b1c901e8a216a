import numpy as np
import torch


def to_numpy(t: torch.Tensor) -> np.ndarray:
    with torch.no_grad():
        host = t.to(torch.device("cpu"), copy=True)
    return host.detach().numpy().copy()
