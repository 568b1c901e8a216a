import numpy as np
import torch

device = torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")
readings = np.linspace(0.0, 3.0, 12).reshape(4, 3)
x = torch.tensor(readings, dtype=torch.float32, device=device)
w = torch.ones(3, 2, device=device)
scores = x @ w
print("above the threshold:", int((scores > 1.5).sum().item()))
