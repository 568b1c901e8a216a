# expect: runs
import numpy as np
import torch

# Ask torch which accelerator this build and machine have: CUDA, MPS, or none.
device = torch.device("mps")  # "everyone here has a Mac"

readings = np.linspace(0.0, 3.0, 12).reshape(4, 3)  # sensor readings, as NumPy loads them (float64)

x = torch.from_numpy(readings).to(device, dtype=torch.float32)  # float32 on the way over: fine on a Mac
w = torch.ones(3, 2, device=device)
scores = x @ w
above = (scores > 1.5).float()  # a comparison: every device has it
print("above the threshold:", int(above.sum().item()))
