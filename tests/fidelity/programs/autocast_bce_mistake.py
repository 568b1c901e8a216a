"""Sigmoid then BCELoss inside autocast: CUDA refuses it."""
import torch
from torch import nn

model = nn.Sequential(nn.Linear(4, 1), nn.Sigmoid()).cuda()
criterion = nn.BCELoss()
x, y = torch.randn(8, 4, device="cuda"), torch.rand(8, 1, device="cuda")
with torch.autocast("cuda"):
    loss = criterion(model(x), y)
print(loss.item())
