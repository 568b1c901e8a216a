# expect: runs_on_a_mac
import numpy as np
import torch

# Ask torch which accelerator this build and machine have: CUDA, MPS, or none.
device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device("cpu")

readings = np.linspace(0.0, 3.0, 12).reshape(4, 3)  # sensor readings, as NumPy loads them (float64)

x = torch.from_numpy(readings).to(device)  # float64, as NumPy made it
w = torch.ones(3, 2, dtype=torch.float64, device=device)
scores = x @ w
above = (scores > 1.5).float()  # a comparison: every device has it
print("above the threshold:", int(above.sum().item()))
