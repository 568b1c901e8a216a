import numpy as np
import torch

if torch.cuda.is_available():
    device = torch.device("cuda")
elif torch.backends.mps.is_available():
    device = torch.device("mps")
else:
    device = torch.device("cpu")

readings = np.linspace(0.0, 3.0, 12).reshape(4, 3).astype(np.float32)  # float32 before torch sees it
x = torch.from_numpy(readings).to(device)
w = torch.ones(3, 2, device=device)
above = torch.where(x @ w > 1.5, 1.0, 0.0)
print("above the threshold:", int(above.sum().item()))
