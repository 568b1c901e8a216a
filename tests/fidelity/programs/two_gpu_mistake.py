# fidelity: gpus=2
"""Two GPUs: one tensor on each, added directly."""
import torch

a = torch.ones(2, 2, device="cuda:0")
b = torch.ones(2, 2, device="cuda:1")
print(a.device, b.device)
c = a + b
print(c)
