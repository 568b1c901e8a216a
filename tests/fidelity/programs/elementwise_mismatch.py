"""Two vectors, one on each side."""
import torch

a = torch.ones(3, device="cuda")
b = torch.ones(3)
print(a.device, b.device)
c = a + b
print(c)
