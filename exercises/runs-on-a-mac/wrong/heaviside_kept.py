# expect: runs_on_a_mac
import numpy as np
import torch

# Ask torch which accelerator this build and machine have: CUDA, MPS, or none.
device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device("cpu")

readings = np.linspace(0.0, 3.0, 12).reshape(4, 3)  # sensor readings, as NumPy loads them (float64)

x = torch.from_numpy(readings).to(device, dtype=torch.float32)  # float32 on the way over: fine on a Mac
w = torch.ones(3, 2, device=device)
scores = x @ w
above = torch.heaviside(scores - 1.5, torch.zeros_like(scores))
print("above the threshold:", int(above.sum().item()))
