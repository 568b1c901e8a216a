# fidelity: gpus=2
"""nn.DataParallel over two GPUs with device_ids given as ordinals."""
import torch
from torch import nn

model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 2)).to(0)
dp = nn.DataParallel(model, device_ids=[0, 1])
out = dp(torch.randn(8, 6))
print(out.device, out.shape)
out.sum().backward()
print(model[0].weight.grad.device, dp.module is model)
