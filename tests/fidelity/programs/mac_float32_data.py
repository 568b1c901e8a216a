# fidelity: machine=mac-m3-max
"""The same data made float32 on the way: the Mac takes it."""
import numpy as np
import torch

data = np.random.rand(8, 3)
x = torch.from_numpy(data).to("mps", dtype=torch.float32)
print(x.dtype, x.device)
y = torch.zeros(2, device="mps")
print(y.dtype, y.device)
