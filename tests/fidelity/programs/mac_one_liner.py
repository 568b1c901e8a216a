# fidelity: machine=mac-m3-max
"""The device one-liner on a Mac: the build's accelerator is mps."""
import torch

device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device("cpu")
print(device)
model = torch.nn.Linear(3, 1).to(device)
print(model(torch.randn(2, 3, device=device)).device)
