# fidelity: machine=mac-m3-max
"""Data loaded with NumPy (float64 by default) sent to a Mac's GPU as it is."""
import numpy as np
import torch

data = np.random.rand(8, 3)
x = torch.from_numpy(data)
print(x.dtype)
x = x.to("mps")
print(x.device)
