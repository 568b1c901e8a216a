"""A 0-dim host tensor may meet a GPU tensor; CUDA copies the scalar along."""
import torch

x = torch.ones(3, device="cuda")
scale = torch.tensor(2.0)
y = x * scale
print(y, y.device)
z = x + torch.tensor(1)
print(z.device, z.dtype)
