# expect: runs_on_a_laptop
import numpy as np
import torch

readings = np.linspace(0.0, 3.0, 12).reshape(4, 3)  # sensor readings, as NumPy loads them

x = torch.from_numpy(readings).cuda()
w = torch.ones(3, 2, dtype=torch.float64).cuda()
scores = x @ w
above = torch.heaviside(scores - 1.5, torch.zeros_like(scores))  # 1 where a score is above 1.5
print("above the threshold:", int(above.sum().item()))
