"""Bringing GPU results back as Python numbers."""
import torch

x = torch.tensor([1.5, 2.5, 3.0], device="cuda")
total = x.sum()
print(total.device, total.item(), type(total.item()).__name__)
print(x.tolist())
print(float(total), int(x[0]))
print(f"{total:.2f}")
print(x.max().item() == 3.0)
