"""Weights made on the device, an input made on the host: `weights @ x`."""
import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
weights = torch.randn(3, 3, device=device)
x = torch.randn(3)
y = weights @ x
print(y)
