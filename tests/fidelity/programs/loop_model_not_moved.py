"""Batches moved, the model forgotten on the host."""
import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
optimizer = torch.optim.Adam(model.parameters())
for step in range(3):
    xb, yb = torch.randn(16, 4).to(device), torch.randn(16, 1).to(device)
    loss = nn.functional.mse_loss(model(xb), yb)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("done")
