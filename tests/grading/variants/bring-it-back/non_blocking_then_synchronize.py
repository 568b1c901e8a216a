import numpy as np
import torch


def to_numpy(t: torch.Tensor) -> np.ndarray:
    host = t.detach().to("cpu", non_blocking=True)
    if t.is_cuda:
        torch.cuda.synchronize()  # wait until the copy has landed before NumPy reads it
    return host.numpy()
